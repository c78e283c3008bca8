// scripts/node: a real kubelet and containerd join the test control plane as a Node, run a pod from the
// locally built sleeper image on the CNI bridge, report its status, kill it on deletion, and `down` leaves
// no process, cgroup, network device or state directory behind.
#include "support/real_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "support/cluster.h"
#include "support/process.h"

namespace dm::test {
namespace {

using nlohmann::json;

class RealNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = TestCluster::start(); }
  static void TearDownTestSuite() { cluster_.reset(); }
  static std::unique_ptr<TestCluster> cluster_;
};
std::unique_ptr<TestCluster> RealNodeTest::cluster_;

// A process that exists and is not a zombie (nothing may reap orphans promptly here).
bool alive(const std::string& pid) {
  const std::string stat = "/proc/" + pid + "/stat";
  if (!std::filesystem::exists(stat)) return false;
  const std::string s = read_file(stat);
  const auto paren = s.rfind(')');
  return paren != std::string::npos && paren + 2 < s.size() && s[paren + 2] != 'Z';
}

json pod_json(const TestCluster& c, const std::string& ns, const std::string& name) {
  auto out = c.kubectl({"-n", ns, "get", "pod", name, "-o", "json"});
  return out.exit_code == 0 ? json::parse(out.out) : json();
}

TEST_F(RealNodeTest, RunsAPodAndDownLeavesNothingBehind) {
  const auto t0 = std::chrono::steady_clock::now();
  auto node = std::make_unique<RealNode>(*cluster_, "real-node-1", "",
                                         std::map<std::string, std::string>{{"NODE_SKIP_DM_IMAGE", "1"}});
  std::printf("[ real node ] up in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  // Registered by the kubelet itself, with node-sim's GPU capacity.
  const json n = cluster_->get_json({"node", "real-node-1"});
  EXPECT_NE(n["status"]["nodeInfo"].value("containerRuntimeVersion", ""), "") << n.dump();
  EXPECT_EQ(n["status"]["nodeInfo"].value("containerRuntimeVersion", "").rfind("containerd://", 0), 0U);
  // The kubelet and the control plane are one pinned Kubernetes release (tools/k8s-build/kubernetes), and the
  // runtime is containerd 2 (CRI v1).
  const auto server = cluster_->kubectl({"get", "--raw", "/version"});
  ASSERT_EQ(server.exit_code, 0) << server.err;
  const std::string server_version = json::parse(server.out).value("gitVersion", "");
  const char* pin = std::getenv("K8S_PIN");
  const std::string pinned = read_file(source_path(
      "tools/k8s-build/" + std::string(pin != nullptr && *pin != '\0' ? pin : "kubernetes") + "/go.mod"));
  EXPECT_THAT(pinned, ::testing::HasSubstr("require k8s.io/kubernetes " + server_version + "\n"))
      << "the control plane is the pinned release";
  EXPECT_EQ(n["status"]["nodeInfo"].value("kubeletVersion", ""), server_version);
  EXPECT_THAT(n["status"]["nodeInfo"].value("containerRuntimeVersion", ""),
              ::testing::StartsWith("containerd://2."));
  EXPECT_EQ(n["status"]["allocatable"].value("nvidia.com/gpu", ""), "8");

  // A pod on the pod network that writes what it sees and holds the (simulated) GPU.
  cluster_->apply(R"(
apiVersion: v1
kind: Pod
metadata:
  name: hello
  namespace: default
  annotations: {node-sim/holds-gpu: "true"}
spec:
  nodeName: real-node-1
  containers:
  - name: main
    image: localhost/sleeper:dev
    imagePullPolicy: IfNotPresent
    command: ["/bin/sh", "-c", "echo started in $(hostname); trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]
)");
  std::string ip;
  const bool running = eventually(
      [&] {
        const json p = pod_json(*cluster_, "default", "hello");
        if (p.is_null() || p["status"].value("phase", "") != "Running") return false;
        ip = p["status"].value("podIP", "");
        return !ip.empty();
      },
      90);
  ASSERT_TRUE(running) << pod_json(*cluster_, "default", "hello").dump(2) << node->logs_tail();
  EXPECT_EQ(ip.rfind("10.250.", 0), 0U) << "pod IP " << ip << " is not on the node's CNI bridge";
  EXPECT_TRUE(eventually([&] { return node->refcnt() == 1; }, 30)) << node->node_sim_log();

  // The container's process is a real process in the node's cgroups.
  const json p = pod_json(*cluster_, "default", "hello");
  const std::string cid = p["status"]["containerStatuses"][0].value("containerID", "");
  const auto pid = node->container_pid(cid);
  ASSERT_TRUE(pid.has_value()) << cid;
  EXPECT_TRUE(alive(std::to_string(*pid)));
  EXPECT_NE(read_file("/proc/" + std::to_string(*pid) + "/cgroup").find(node->env("NODE_CGROUP_ROOT")),
            std::string::npos);
  // Its output, where the kubelet keeps container logs (the node's own /var/log/pods).
  const std::string log_file =
      node->env("NODE_POD_LOGS") + "/default_hello_" + p["metadata"].value("uid", "") + "/main/0.log";
  EXPECT_TRUE(eventually(
      [&] {
        return std::filesystem::exists(log_file) &&
               read_file(log_file).find("started in hello") != std::string::npos;
      },
      30))
      << log_file;

  // Deleted: the kubelet stops the container (SIGTERM, the sleeper exits at once) and removes the pod.
  const auto del = std::chrono::steady_clock::now();
  ASSERT_EQ(cluster_->kubectl({"-n", "default", "delete", "pod", "hello", "--wait=false"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return pod_json(*cluster_, "default", "hello").is_null(); }, 60))
      << node->logs_tail();
  std::printf("[ real node ] pod deleted in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - del).count());
  EXPECT_FALSE(alive(std::to_string(*pid)));
  EXPECT_EQ(node->refcnt(), 0);

  // down: nothing left.
  const std::string state = node->state_dir();
  const std::string cgroup = node->env("NODE_CGROUP_ROOT");
  const std::string holder = node->env("NODE_MNTNS_PID");
  auto pid_of = [&](const std::string& name) {
    std::string s = read_file(state + "/pids/" + name + ".pid");
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  };
  const std::string kubelet_pid = pid_of("kubelet");
  const std::string node_sim_pid = pid_of("node-sim");
  EXPECT_TRUE(alive(kubelet_pid));
  EXPECT_TRUE(alive(node_sim_pid));
  std::string bridge = read_file(state + "/bridge");
  while (!bridge.empty() && bridge.back() == '\n') bridge.pop_back();
  EXPECT_EQ(run_command({"ip", "link", "show", bridge}).exit_code, 0) << "no bridge " << bridge;
  const auto out = node->down();
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_FALSE(std::filesystem::exists(state));
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/pids" + cgroup));
  EXPECT_FALSE(alive(holder));
  EXPECT_FALSE(alive(kubelet_pid));
  EXPECT_FALSE(alive(node_sim_pid));
  EXPECT_NE(run_command({"ip", "link", "show", bridge}).exit_code, 0) << "bridge " << bridge << " left";
  node.reset();
}

}  // namespace
}  // namespace dm::test
