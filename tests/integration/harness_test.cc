// The test harness itself, against a real control plane: node-sim registers its node, runs and finishes
// pods like a kubelet (side by side when they are due together), keeps the simulated nvidia refcount equal to
// the GPU-holding pods, and PDBs block evictions of its (Ready) pods with 429.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/config.h"
#include "support/cluster.h"
#include "support/node_sim.h"
#include "support/process.h"

namespace dm::test {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr const char* kNode = "gpu-node-1";  // the shared node; fixtures pin their pods to it
constexpr int kGpus = 4;                     // not the default 8, so the flag is seen to work

std::string fixture(const std::string& name) {
  return read_file(source_path("tests/fixtures/harness/" + name));
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

class HarnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = TestCluster::start().release();
    NodeSimOptions opt;
    opt.gpus = kGpus;
    opt.extra_args = {"--heartbeat-seconds", "1"};
    sim_ = new NodeSim(*cluster_, kNode, {}, opt);
  }
  static void TearDownTestSuite() {
    delete sim_;
    sim_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }

  // Creates a namespace and waits for its default ServiceAccount (pods are rejected before it exists).
  static void create_namespace(const std::string& ns) {
    cluster_->apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n");
    ASSERT_TRUE(eventually(
        [&] {
          auto out = cluster_->kubectl(
              {"-n", ns, "get", "serviceaccount", "default", "-o", "jsonpath={.metadata.name}"});
          return out.exit_code == 0 && !out.out.empty();
        },
        60))
        << "no default ServiceAccount in namespace " << ns;
  }

  // The pod as JSON, or null if it does not exist.
  static json get_pod(const std::string& ns, const std::string& name) {
    auto out = cluster_->kubectl({"-n", ns, "get", "pod", name, "-o", "json", "--ignore-not-found"});
    if (out.exit_code != 0 || out.out.empty()) return nullptr;
    return json::parse(out.out);
  }

  static std::vector<json> list_pods(const std::string& ns, const std::string& selector = {}) {
    std::vector<std::string> args = {"pods", "-n", ns};
    if (!selector.empty()) {
      args.emplace_back("-l");
      args.push_back(selector);
    }
    auto list = cluster_->get_json(args);
    return list["items"].get<std::vector<json>>();
  }

  static bool condition_true(const json& pod, const std::string& type) {
    for (const auto& c : pod["status"].value("conditions", json::array())) {
      if (c.value("type", "") == type) return c.value("status", "") == "True";
    }
    return false;
  }

  static bool running_and_ready(const json& pod) {
    return !pod.is_null() && pod["status"].value("phase", "") == "Running" && condition_true(pod, "Ready");
  }

  static bool terminating(const json& pod) {
    return !pod.is_null() && pod["metadata"].contains("deletionTimestamp");
  }

  static bool wait_running(const std::string& ns, const std::string& name) {
    return eventually([&] { return running_and_ready(get_pod(ns, name)); });
  }

  static bool wait_gone(const std::string& ns, const std::string& name, double timeout_s = 30) {
    return eventually([&] { return get_pod(ns, name).is_null(); }, timeout_s);
  }

  static void delete_pod_async(const std::string& ns, const std::string& name) {
    auto out = cluster_->kubectl({"-n", ns, "delete", "pod", name, "--wait=false"});
    ASSERT_EQ(out.exit_code, 0) << out.err;
  }

  static void delete_node(const std::string& node) {
    cluster_->kubectl({"delete", "node", node, "--wait=false"});
  }

  static TestCluster* cluster_;
  static NodeSim* sim_;
};

TestCluster* HarnessTest::cluster_ = nullptr;
NodeSim* HarnessTest::sim_ = nullptr;

TEST_F(HarnessTest, RegistersReadyNodeWithGpusAndLoadedDriver) {
  const json node = cluster_->get_json({"node", kNode});
  EXPECT_TRUE(condition_true(node, "Ready"));
  for (const char* pressure : {"MemoryPressure", "DiskPressure", "PIDPressure"}) {
    bool found = false;
    for (const auto& c : node["status"]["conditions"]) {
      if (c["type"] == pressure) {
        found = true;
        EXPECT_EQ(c["status"], "False") << pressure;
      }
    }
    EXPECT_TRUE(found) << pressure;
  }
  EXPECT_EQ(node["status"]["allocatable"]["nvidia.com/gpu"], std::to_string(kGpus));
  EXPECT_EQ(node["status"]["capacity"]["nvidia.com/gpu"], std::to_string(kGpus));
  EXPECT_EQ(node["status"]["allocatable"]["cpu"], "32");
  EXPECT_EQ(node["status"]["allocatable"]["memory"], "256Gi");
  EXPECT_EQ(node["status"]["allocatable"]["pods"], "110");
  EXPECT_EQ(node["metadata"]["labels"]["kubernetes.io/hostname"], kNode);
  EXPECT_EQ(node["metadata"]["labels"]["kubernetes.io/os"], "linux");

  // Heartbeats: the node's Lease exists and is renewed (every second here).
  json lease;
  ASSERT_TRUE(eventually([&] {
    auto out = cluster_->kubectl({"-n", "kube-node-lease", "get", "lease", kNode, "-o", "json"});
    if (out.exit_code != 0) return false;
    lease = json::parse(out.out);
    return true;
  }));
  EXPECT_EQ(lease["spec"]["holderIdentity"], kNode);
  const std::string first_renew = lease["spec"].value("renewTime", "");
  EXPECT_TRUE(eventually([&] {
    auto l =
        json::parse(cluster_->kubectl({"-n", "kube-node-lease", "get", "lease", kNode, "-o", "json"}).out);
    return l["spec"].value("renewTime", "") != first_renew;
  })) << "lease never renewed";

  // The simulated driver is loaded: the uvm and modeset modules are never held by pods.
  EXPECT_EQ(sim_->refcnt("nvidia_uvm"), 0);
  EXPECT_EQ(sim_->refcnt("nvidia_modeset"), 0);
  EXPECT_TRUE(sim_->refcnt("nvidia").has_value());
  EXPECT_EQ(read_file(sim_->module_dir("nvidia_uvm") + "/refcnt"), "0\n");
}

TEST_F(HarnessTest, DaemonSetPodIsScheduledAndBecomesRunningAndReady) {
  create_namespace("harness-ds");
  cluster_->apply(fixture("daemonset.yaml"));
  json pod;
  ASSERT_TRUE(eventually([&] {
    auto pods = list_pods("harness-ds", "app=ds-client");
    if (pods.size() != 1) return false;
    pod = pods[0];
    return running_and_ready(pod);
  })) << "DaemonSet pod never Running+Ready; node-sim log:\n"
      << sim_->log();
  EXPECT_EQ(pod["spec"]["nodeName"], kNode);
  EXPECT_TRUE(condition_true(pod, "ContainersReady"));
  EXPECT_TRUE(condition_true(pod, "Initialized"));
  EXPECT_TRUE(condition_true(pod, "PodScheduled"));
  EXPECT_FALSE(pod["status"].value("podIP", "").empty());
  EXPECT_EQ(pod["status"].value("hostIP", ""), "127.0.0.1");
  ASSERT_EQ(pod["status"]["containerStatuses"].size(), 2U);
  for (const auto& cs : pod["status"]["containerStatuses"]) {
    EXPECT_TRUE(cs["ready"].get<bool>()) << cs.dump();
    EXPECT_TRUE(cs["state"].contains("running")) << cs.dump();
  }
  // The DaemonSet controller counts it as ready.
  EXPECT_TRUE(eventually([&] {
    auto ds = cluster_->get_json({"daemonset", "ds-client", "-n", "harness-ds"});
    return ds["status"].value("numberReady", 0) == 1 && ds["status"].value("desiredNumberScheduled", 0) == 1;
  }));
  EXPECT_THAT(sim_->log(), HasSubstr("pod harness-ds/" + pod["metadata"].value("name", "") + ": started"));
}

// As the kubelet restarts a control plane's static pods: kube-scheduler and kube-controller-manager are
// started again when they exit (kube-scheduler exits on purpose on a corrupted cache), said in
// logs/supervisor.log, and pods created afterwards are scheduled.
TEST_F(HarnessTest, AControlPlaneComponentThatExitsIsStartedAgain) {
  const std::string pid_file = cluster_->state_dir() + "/pids/kube-scheduler.pid";
  const std::string before = read_file(pid_file);
  ASSERT_EQ(::kill(std::stoi(before), SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return read_file(pid_file) != before; }, 30)) << "not started again";
  EXPECT_EQ(::kill(std::stoi(read_file(pid_file)), 0), 0) << "the new one runs";
  EXPECT_THAT(read_file(cluster_->state_dir() + "/logs/supervisor.log"),
              HasSubstr("kube-scheduler exited (last line: "));
  create_namespace("harness-restart");
  cluster_->apply(
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: after-restart\n  namespace: harness-restart\nspec:\n"
      "  containers:\n  - name: main\n    image: example.com/after-restart:1\n");
  EXPECT_TRUE(eventually(
      [&] {
        return cluster_->get_json({"pod", "after-restart", "-n", "harness-restart"})["spec"].value(
                   "nodeName", "") == kNode;
      },
      60))
      << "scheduled by the restarted kube-scheduler";
}

TEST_F(HarnessTest, DeletionTakesTheAnnotatedDelayOrTheGracePeriod) {
  create_namespace("harness-delete");
  cluster_->apply(fixture("delayed-pods.yaml"));
  ASSERT_TRUE(wait_running("harness-delete", "delayed")) << sim_->log();
  ASSERT_TRUE(wait_running("harness-delete", "graceful")) << sim_->log();

  delete_pod_async("harness-delete", "delayed");   // annotation 2.5 s, grace period 30 s
  delete_pod_async("harness-delete", "graceful");  // no annotation, grace period 3 s
  // Each is seen terminating before it is gone (the deletion is sent by a kubectl of its own, which a loaded
  // machine may start late: looked for rather than assumed after a fixed second).
  bool delayed_seen = false;
  bool graceful_seen = false;
  eventually(
      [&] {
        delayed_seen = delayed_seen || terminating(get_pod("harness-delete", "delayed"));
        graceful_seen = graceful_seen || terminating(get_pod("harness-delete", "graceful"));
        return delayed_seen && graceful_seen;
      },
      10);
  EXPECT_TRUE(delayed_seen) << "finished before its 2.5 s delay";
  EXPECT_TRUE(graceful_seen) << "finished before its 3 s grace period";
  // Well before the 30 s grace period: the annotation, not the grace period, decided.
  EXPECT_TRUE(wait_gone("harness-delete", "delayed", 20)) << sim_->log();
  EXPECT_TRUE(wait_gone("harness-delete", "graceful", 30)) << sim_->log();
  EXPECT_THAT(sim_->log(), HasSubstr("pod harness-delete/delayed: finished"));
  EXPECT_THAT(sim_->log(), HasSubstr("pod harness-delete/graceful: finished"));
}

TEST_F(HarnessTest, StuckTerminatingPodStaysUntilTheAnnotationIsRemoved) {
  create_namespace("harness-stuck");
  cluster_->apply(fixture("stuck-pod.yaml"));
  ASSERT_TRUE(wait_running("harness-stuck", "stuck")) << sim_->log();
  delete_pod_async("harness-stuck", "stuck");
  ASSERT_TRUE(eventually([&] { return terminating(get_pod("harness-stuck", "stuck")); }));
  sleep_s(3);  // terminate-after is 0: without the stuck annotation it would be gone by now
  EXPECT_TRUE(terminating(get_pod("harness-stuck", "stuck")));
  EXPECT_THAT(sim_->log(), HasSubstr("pod harness-stuck/stuck: terminating, but annotated"));

  // Unsticking it lets node-sim finish it.
  auto out =
      cluster_->kubectl({"-n", "harness-stuck", "annotate", "pod", "stuck", "node-sim/stuck-terminating-"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_TRUE(wait_gone("harness-stuck", "stuck")) << sim_->log();
}

TEST_F(HarnessTest, RefcountFollowsGpuPodsUpAndDown) {
  create_namespace("harness-gpu");
  ASSERT_EQ(sim_->refcnt(), 0) << "another test left a GPU holder on " << kNode;

  cluster_->apply(fixture("gpu-deployment.yaml"));
  ASSERT_TRUE(eventually([&] { return sim_->refcnt() == 2; })) << sim_->log();
  auto users = sim_->users();
  ASSERT_EQ(users.size(), 2U);
  for (const auto& u : users) EXPECT_THAT(u, StartsWith("harness-gpu/gpu-dep-"));

  cluster_->apply(fixture("gpu-pods.yaml"));
  for (const char* name : {"gpu-client", "sim-holder", "mig-pod", "not-a-client", "plain"}) {
    ASSERT_TRUE(wait_running("harness-gpu", name)) << name << "\n" << sim_->log();
  }
  // The two non-holders are Running too, yet only the three holders are added.
  ASSERT_TRUE(eventually([&] { return sim_->refcnt() == 5; })) << "refcnt " << sim_->refcnt().value_or(-1);
  users = sim_->users();
  EXPECT_EQ(users.size(), 5U);
  for (const char* holder : {"harness-gpu/gpu-client", "harness-gpu/sim-holder", "harness-gpu/mig-pod"}) {
    EXPECT_NE(std::find(users.begin(), users.end(), holder), users.end()) << holder;
  }
  for (const char* other : {"harness-gpu/not-a-client", "harness-gpu/plain"}) {
    EXPECT_EQ(std::find(users.begin(), users.end(), other), users.end()) << other;
  }

  // A terminating pod still holds the GPU until it has finished (3 s here).
  delete_pod_async("harness-gpu", "gpu-client");
  sleep_s(1);
  ASSERT_TRUE(terminating(get_pod("harness-gpu", "gpu-client")));
  EXPECT_EQ(sim_->refcnt(), 5);
  users = sim_->users();
  EXPECT_NE(std::find(users.begin(), users.end(), "harness-gpu/gpu-client"), users.end());
  EXPECT_TRUE(eventually([&] { return sim_->refcnt() == 4; })) << sim_->log();
  EXPECT_TRUE(wait_gone("harness-gpu", "gpu-client"));

  auto out = cluster_->kubectl({"-n", "harness-gpu", "scale", "deployment", "gpu-dep", "--replicas=0"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  ASSERT_TRUE(eventually([&] { return sim_->refcnt() == 2; })) << sim_->log();
  EXPECT_THAT(sim_->users(), UnorderedElementsAre("harness-gpu/mig-pod", "harness-gpu/sim-holder"));

  out = cluster_->kubectl({"-n", "harness-gpu", "delete", "pods", "--all", "--wait=false"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_TRUE(eventually([&] { return sim_->refcnt() == 0; })) << sim_->log();
  EXPECT_THAT(sim_->users(), IsEmpty());
  EXPECT_THAT(sim_->log(), HasSubstr("nvidia refcnt 0 -> 1"));
}

TEST_F(HarnessTest, EvictionBlockedByPdbReturns429) {
  create_namespace("harness-pdb");
  cluster_->apply(fixture("pdb.yaml"));
  std::vector<json> pods;
  ASSERT_TRUE(eventually([&] {
    pods = list_pods("harness-pdb", "app=guarded");
    return pods.size() == 2 && running_and_ready(pods[0]) && running_and_ready(pods[1]);
  })) << sim_->log();
  // The disruption controller must have seen both Ready pods before the budget means anything.
  ASSERT_TRUE(eventually([&] {
    auto pdb = cluster_->get_json({"pdb", "guarded", "-n", "harness-pdb"});
    return pdb["status"].value("currentHealthy", 0) == 2 &&
           pdb["status"].value("disruptionsAllowed", -1) == 0;
  }));

  auto config = kube::load_kubeconfig(cluster_->kubeconfig());
  ASSERT_TRUE(config.ok()) << config.error().message;
  kube::ClientOptions copt;
  copt.retry_for = std::chrono::milliseconds(0);
  auto client = kube::Client::create(*config, copt);
  ASSERT_TRUE(client.ok()) << client.error().message;

  const auto victim = pods[0]["metadata"]["name"].get<std::string>();
  auto st = (*client)->evict("harness-pdb", victim);
  ASSERT_FALSE(st.ok()) << "eviction of " << victim << " was allowed despite the budget";
  EXPECT_EQ(st.error().http_status, 429) << st.error().message;
  EXPECT_THAT(st.error().message, HasSubstr("disruption budget"));
  sleep_s(1);
  EXPECT_FALSE(terminating(get_pod("harness-pdb", victim)));

  // With room in the budget the same eviction goes through, and node-sim finishes the pod.
  auto out = cluster_->kubectl({"-n", "harness-pdb", "patch", "pdb", "guarded", "--type=merge", "-p",
                                R"({"spec":{"minAvailable":1}})"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  ASSERT_TRUE(eventually([&] {
    auto pdb = cluster_->get_json({"pdb", "guarded", "-n", "harness-pdb"});
    return pdb["status"].value("disruptionsAllowed", 0) == 1;
  }));
  auto st2 = (*client)->evict("harness-pdb", victim);
  EXPECT_TRUE(st2.ok()) << st2.error().message;
  EXPECT_TRUE(wait_gone("harness-pdb", victim)) << sim_->log();
}

TEST_F(HarnessTest, NoDriverCreatesNoModuleFilesAndSigtermExitsZero) {
  create_namespace("harness-nodrv");
  NodeSimOptions opt;
  opt.no_driver = true;
  NodeSim nodrv(*cluster_, "nodrv-node", {}, opt);
  cluster_->apply(fixture("nodrv-pod.yaml"));
  ASSERT_TRUE(wait_running("harness-nodrv", "gpu-pod")) << nodrv.log();
  // The GPU pod runs (so node-sim has had a reason to touch the refcount) but there is no driver.
  sleep_s(0.5);
  EXPECT_FALSE(std::filesystem::exists(nodrv.sim_root() + "/sys/module/nvidia"));
  EXPECT_FALSE(std::filesystem::exists(nodrv.sim_root() + "/sys"));
  EXPECT_FALSE(nodrv.refcnt().has_value());

  delete_pod_async("harness-nodrv", "gpu-pod");
  EXPECT_TRUE(wait_gone("harness-nodrv", "gpu-pod")) << nodrv.log();
  EXPECT_EQ(nodrv.stop(), 0) << nodrv.log();
  EXPECT_THAT(nodrv.log(), HasSubstr("stopping"));
  delete_node("nodrv-node");
}

TEST_F(HarnessTest, UnloadedModuleIsNeverRecreated) {
  create_namespace("harness-unload");
  NodeSim sim(*cluster_, "unload-node");
  EXPECT_EQ(sim.refcnt(), 0);
  cluster_->apply(fixture("unload-pod-before.yaml"));
  ASSERT_TRUE(eventually([&] { return sim.refcnt() == 1; })) << sim.log();
  EXPECT_THAT(sim.users(), ElementsAre("harness-unload/holder-before"));

  // What driver-manager's simulated host does on a successful unload.
  std::filesystem::remove_all(sim.module_dir("nvidia"));

  // Two refcount changes after the unload: neither may bring the module back.
  delete_pod_async("harness-unload", "holder-before");
  ASSERT_TRUE(wait_gone("harness-unload", "holder-before")) << sim.log();
  cluster_->apply(fixture("unload-pod-after.yaml"));
  ASSERT_TRUE(wait_running("harness-unload", "holder-after")) << sim.log();
  EXPECT_TRUE(eventually([&] { return sim.log().find("not recreating") != std::string::npos; })) << sim.log();
  sleep_s(0.5);
  EXPECT_FALSE(std::filesystem::exists(sim.module_dir("nvidia")));
  EXPECT_EQ(sim.refcnt("nvidia_uvm"), 0);  // only the unloaded module is gone

  delete_pod_async("harness-unload", "holder-after");
  EXPECT_TRUE(wait_gone("harness-unload", "holder-after")) << sim.log();
  EXPECT_EQ(sim.stop(), 0);
  delete_node("unload-node");
}

// Pods whose terminations end at the same moment are deleted side by side, none before its delay and none
// before the refcount dropped. The pods are deleted while no node-sim runs, so the next node-sim sees every
// deletion in its first list, at one instant: they are all due together.
TEST_F(HarnessTest, PodsDueTogetherAreDeletedSideBySideAfterTheirDelay) {
  create_namespace("harness-burst");
  constexpr int kPods = 8;  // burst-1..8, 2 s each; the even ones hold the GPU
  std::string earlier_log;
  {
    NodeSim first(*cluster_, "burst-node");
    cluster_->apply(fixture("burst-pods.yaml"));
    for (int i = 1; i <= kPods; ++i) {
      ASSERT_TRUE(wait_running("harness-burst", "burst-" + std::to_string(i))) << first.log();
    }
    ASSERT_TRUE(eventually([&] { return first.refcnt() == kPods / 2; })) << first.log();
    ASSERT_EQ(first.stop(), 0) << first.log();
    earlier_log = first.log();  // the next node-sim appends to the same file
  }
  auto out = cluster_->kubectl({"-n", "harness-burst", "delete", "pods", "--all", "--wait=false"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  ASSERT_TRUE(eventually([&] {
    auto pods = list_pods("harness-burst");
    return pods.size() == kPods &&
           std::all_of(pods.begin(), pods.end(), [](const json& p) { return terminating(p); });
  }));

  NodeSim second(*cluster_, "burst-node");
  for (int i = 1; i <= kPods; ++i) {
    EXPECT_TRUE(wait_gone("harness-burst", "burst-" + std::to_string(i))) << second.log();
  }
  EXPECT_EQ(second.refcnt(), 0);
  EXPECT_THAT(second.users(), IsEmpty());
  EXPECT_EQ(second.stop(), 0) << second.log();
  delete_node("burst-node");

  const std::string full = second.log();
  ASSERT_GE(full.size(), earlier_log.size());
  std::vector<std::string> lines;
  std::istringstream in(full.substr(earlier_log.size()));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const auto index_of = [&](const std::string& text) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find(text) != std::string::npos) return static_cast<int>(i);
    }
    return -1;
  };
  // The four GPU holders were counted from the list, and released all at once when their time came.
  const int released = index_of("nvidia refcnt " + std::to_string(kPods / 2) + " -> 0");
  ASSERT_GE(index_of("nvidia refcnt 0 -> " + std::to_string(kPods / 2)), 0) << full;
  ASSERT_GE(released, 0) << full;

  int first_finished = -1;
  int deleting_before_first_finished = 0;
  for (int i = 1; i <= kPods; ++i) {
    const std::string pod = "pod harness-burst/burst-" + std::to_string(i) + ": ";
    const int deleting = index_of(pod + "terminated after ");
    const int finished = index_of(pod + "finished (deleted ");
    ASSERT_GE(deleting, 0) << pod << "never deleted:\n" << full;
    ASSERT_GT(finished, deleting) << full;
    // Not before its 2 s, by node-sim's own clock (both figures are measured from when it saw the deletion).
    const std::string& line = lines[static_cast<size_t>(finished)];
    const double took = std::stod(line.substr(line.find("(deleted ") + 9));
    EXPECT_GE(took, 2.0) << line;
    const std::string& started = lines[static_cast<size_t>(deleting)];
    EXPECT_GE(std::stod(started.substr(started.find("terminated after ") + 17)), 2.0) << started;
    // The device was released before any DELETE was sent.
    EXPECT_LT(released, deleting) << full;
    if (first_finished < 0 || finished < first_finished) first_finished = finished;
  }
  for (int i = 1; i <= kPods; ++i) {
    const int deleting = index_of("pod harness-burst/burst-" + std::to_string(i) + ": terminated after ");
    if (deleting < first_finished) ++deleting_before_first_finished;
  }
  // Side by side: more than one DELETE was under way before the first of them returned.
  EXPECT_GE(deleting_before_first_finished, 2) << full;
}

}  // namespace
}  // namespace dm::test
