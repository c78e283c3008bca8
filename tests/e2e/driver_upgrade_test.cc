// The driver-manager image as the GPU Operator runs it: the k8s-driver-manager init container of a driver
// DaemonSet shaped like the operator's, on a real kubelet (scripts/node), with the operator's stock RBAC,
// next to operands, third-party GPU clients and a GPU workload. The kubelet starts, restarts and stops the
// init container; the DaemonSet controller recreates the driver pod; node-sim only simulates the kernel.
//
// The scenarios run in order on one node; each starts from the same steady state (the driver pod done,
// everything running, nothing tainted or cordoned) and installs a new driver configuration digest, so that
// each run takes the full uninstall path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "support/cluster.h"
#include "support/process.h"
#include "support/real_node.h"

namespace dm::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kNode = "gpu-node-1";
constexpr const char* kOperatorNs = "gpu-operator";
constexpr const char* kAppsNs = "gpu-apps";
constexpr const char* kDriverDs = "nvidia-driver-daemonset";
constexpr const char* kInit = "k8s-driver-manager";
constexpr const char* kDriverSa = "system:serviceaccount:gpu-operator:nvidia-driver";
constexpr const char* kUpgradeAnnotation = "nvidia.com/gpu-driver-upgrade-enabled";
// Pods that hold the simulated GPU in the steady state: two operands, four clients, one workload.
constexpr int kHolders = 7;
// Every pod on the node besides the driver's: three operands, four clients, one workload.
constexpr size_t kOthers = 8;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

std::string api_port(const TestCluster& c) {
  const std::string url = read_file(c.state_dir() + "/apiserver.url");
  std::string port = url.substr(url.rfind(':') + 1);
  while (!port.empty() && (port.back() == '\n' || port.back() == '\r')) port.pop_back();
  return port;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class DriverUpgrade : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto t0 = std::chrono::steady_clock::now();
    cluster_ = TestCluster::start();
    node_ = std::make_unique<RealNode>(*cluster_, kNode);
    std::printf("[ e2e ] cluster and real node up in %.1f s\n", seconds_since(t0));
    c().apply(std::string("apiVersion: v1\nkind: Namespace\nmetadata: {name: ") + kOperatorNs +
              "}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: " + kAppsNs + "}\n");
    for (const char* ns : {kOperatorNs, kAppsNs}) {
      // Pods can only be created once the namespace's default ServiceAccount exists.
      ASSERT_TRUE(eventually([&] {
        return !c().kubectl({"-n", ns, "get", "sa", "default", "-o", "jsonpath={.metadata.name}"})
                    .out.empty();
      }));
    }
    // The operator's stock role (before v26.7: no pods watch) for the driver DaemonSet's service account,
    // and nothing more.
    c().apply(read_file(source_path("tests/fixtures/e2e/clusterrole-nvidia-driver.yaml")));
    c().apply(
        std::string("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: nvidia-driver, namespace: ") +
        kOperatorNs +
        "}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: "
        "e2e-nvidia-driver}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "
        "e2e-nvidia-driver}\nsubjects: [{kind: ServiceAccount, name: nvidia-driver, namespace: " +
        kOperatorNs + "}]\n");
    ASSERT_TRUE(eventually([&] {
      return !c().kubectl(
                     {"-n", kOperatorNs, "get", "sa", "nvidia-driver", "-o", "jsonpath={.metadata.name}"})
                  .out.empty();
    }));
    ASSERT_EQ(
        c().kubectl({"label", "node", kNode, "--overwrite", "nvidia.com/gpu.deploy.driver=true",
                     "nvidia.com/gpu.deploy.device-plugin=true", "nvidia.com/gpu.deploy.dcgm-exporter=true",
                     "nvidia.com/gpu.deploy.gpu-feature-discovery=true"})
            .exit_code,
        0);
    // The first driver: nothing runs on the node yet.
    apply_driver("v1");
    ASSERT_TRUE(eventually([&] { return driver_done(); }, 180)) << debug();
    c().apply(replace_all(replace_all(replace_all(read_file(source_path("tests/fixtures/e2e/workloads.yaml")),
                                                  "@OPERATOR_NS@", kOperatorNs),
                                      "@CLIENT_NS@", kAppsNs),
                          "@NODE@", kNode));
    ASSERT_TRUE(eventually([&] { return steady(); }, 180)) << debug();
    std::printf("[ e2e ] steady state (driver v1, %zu pods, refcount %d) after %.1f s\n", kOthers, kHolders,
                seconds_since(t0));
  }
  static void TearDownTestSuite() {
    node_.reset();
    cluster_.reset();
  }

  static TestCluster& c() { return *cluster_; }
  static RealNode& node() { return *node_; }

  // The driver DaemonSet with configuration digest `digest`; `extra_env` adds init container variables.
  static void apply_driver(const std::string& digest,
                           const std::map<std::string, std::string>& extra_env = {}) {
    std::string env;
    for (const auto& [k, v] : extra_env) {
      env += "        - name: ";
      env += k;
      env += "\n          value: \"";
      env += v;
      env += "\"\n";
    }
    if (!env.empty()) env.pop_back();
    std::string yaml = read_file(source_path("tests/fixtures/e2e/driver-daemonset.yaml"));
    yaml = replace_all(yaml, "@EXTRA_ENV@", env);
    yaml = replace_all(yaml, "@NAMESPACE@", kOperatorNs);
    yaml = replace_all(yaml, "@DIGEST@", digest);
    yaml = replace_all(yaml, "@SIM_ROOT@", node().sim_root());
    yaml = replace_all(yaml, "@API_PORT@", api_port(c()));
    c().apply(yaml);
  }

  static json pods(const std::string& ns, const std::string& selector = {}) {
    std::vector<std::string> args = {"-n", ns, "get", "pods", "-o", "json"};
    if (!selector.empty()) {
      args.emplace_back("-l");
      args.push_back(selector);
    }
    auto out = c().kubectl(args);
    return out.exit_code == 0 ? json::parse(out.out)["items"] : json::array();
  }
  static std::optional<json> driver_pod() {
    for (const auto& p : pods(kOperatorNs, "app=nvidia-driver-daemonset")) {
      if (!p["metadata"].contains("deletionTimestamp")) return p;
    }
    return std::nullopt;
  }
  static std::string uid(const json& p) { return p["metadata"].value("uid", ""); }

  static bool container_running(const json& pod, const char* list, const std::string& name) {
    for (const auto& s : pod["status"].value(list, json::array())) {
      if (s.value("name", "") == name) return s.value("state", json::object()).contains("running");
    }
    return false;
  }
  // The init container's current status (null if not reported yet).
  static json init_status(const json& pod) {
    for (const auto& s : pod["status"].value("initContainerStatuses", json::array())) {
      if (s.value("name", "") == kInit) return s;
    }
    return nullptr;
  }
  static std::optional<int> init_exit_code(const json& pod) {
    const json s = init_status(pod);
    if (s.is_null() || !s.value("state", json::object()).contains("terminated")) return std::nullopt;
    return s["state"]["terminated"].value("exitCode", -1);
  }

  // The driver pod's init container exited 0 and its driver container runs.
  static bool driver_done(const std::string& not_uid = {}) {
    const auto p = driver_pod();
    return p && uid(*p) != not_uid && init_exit_code(*p) == 0 &&
           container_running(*p, "containerStatuses", "nvidia-driver-ctr");
  }

  // Everything is back: the driver done, every other pod running, the refcount they hold, the node neither
  // tainted nor cordoned nor left with paused labels.
  static bool steady() {
    if (!driver_done()) return false;
    size_t running = 0;
    for (const char* ns : {kOperatorNs, kAppsNs}) {
      for (const auto& p : pods(ns)) {
        if (p["metadata"]["labels"].value("app", "") == kDriverDs) continue;
        if (p["metadata"].contains("deletionTimestamp") || p["status"].value("phase", "") != "Running")
          return false;
        ++running;
      }
    }
    if (running != kOthers || node().refcnt() != kHolders) return false;
    const json n = c().get_json({"node", kNode});
    return !n["spec"].value("unschedulable", false) && !n["spec"].contains("taints") &&
           paused_labels(n).empty();
  }
  static std::vector<std::string> paused_labels(const json& n) {
    std::vector<std::string> out;
    for (const auto& [k, v] : n["metadata"]["labels"].items()) {
      if (v.is_string() && v.get<std::string>().find("paused-for-driver-upgrade") != std::string::npos)
        out.push_back(k);
    }
    return out;
  }

  // UIDs of the running pods app=<app> in the apps namespace.
  static std::set<std::string> uids_of(const std::string& app, const char* ns = kAppsNs) {
    std::set<std::string> out;
    for (const auto& p : pods(ns, "app=" + app)) out.insert(uid(p));
    return out;
  }

  // The init container's log for run `restart` (the kubelet's own file on the node).
  static std::string init_log_path(const json& pod, int restart) {
    return node().env("NODE_POD_LOGS") + "/" + kOperatorNs + "_" + pod["metadata"].value("name", "") + "_" +
           uid(pod) + "/" + kInit + "/" + std::to_string(restart) + ".log";
  }
  static std::string init_log(const json& pod, int restart = 0) {
    const std::string path = init_log_path(pod, restart);
    return std::filesystem::exists(path) ? read_file(path) : std::string();
  }
  // Every run's log the kubelet still keeps, oldest first: an init container that keeps failing is restarted,
  // and the kubelet removes the logs of all but its latest dead attempts, so a slow look may find the first
  // run's log gone and the current run's not written yet.
  static std::string init_logs_kept(const json& pod) {
    const std::filesystem::path dir = std::filesystem::path(init_log_path(pod, 0)).parent_path();
    std::map<int, std::string> runs;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
      const std::string stem = f.path().stem().string();
      if (f.path().extension() == ".log" && !stem.empty() &&
          stem.find_first_not_of("0123456789") == std::string::npos)
        runs[std::stoi(stem)] = read_file(f.path().string());
    }
    std::string out;
    for (const auto& [run, text] : runs) out += text;
    return out;
  }

  // Audit events of the driver pod's service account from index `from` on.
  // The driver pod's requests from audit index `from`; `writes_only`: those whose verb writes. A
  // SelfSubjectAccessReview is a question to the API server that stores nothing, so its "create" is no write.
  static std::vector<json> sa_requests(size_t from, bool writes_only) {
    static const std::set<std::string> kWrites = {"create", "update", "patch", "delete", "deletecollection"};
    std::vector<json> out;
    const auto events = c().audit_events();
    for (size_t i = from; i < events.size(); ++i) {
      const auto& e = events[i];
      if (e.value("stage", "") != "ResponseComplete" || e["user"].value("username", "") != kDriverSa)
        continue;
      const bool review =
          e.value("objectRef", json::object()).value("resource", "") == "selfsubjectaccessreviews";
      if (!writes_only || (kWrites.count(e.value("verb", "")) > 0 && !review)) out.push_back(e);
    }
    return out;
  }
  static size_t evictions_of(const std::vector<json>& requests, const std::string& pod_prefix) {
    size_t n = 0;
    for (const auto& e : requests) {
      const json& o = e.value("objectRef", json::object());
      if (o.value("subresource", "") == "eviction" && o.value("name", "").rfind(pod_prefix, 0) == 0) ++n;
    }
    return n;
  }

  // Deletes the driver pod as the upgrade controller does (the DaemonSet is OnDelete).
  static void delete_driver_pod(const json& pod) {
    ASSERT_EQ(
        c().kubectl({"-n", kOperatorNs, "delete", "pod", pod["metadata"].value("name", ""), "--wait=false"})
            .exit_code,
        0);
  }

  // The new driver installed `digest`: state file, exactly one driver root mounted (the old one was unmounted
  // through the Bidirectional mount, not hidden under the new one) holding that version.
  static void expect_driver_installed(const std::string& digest) {
    const std::string root = node().sim_root();
    // node-sim writes the state file once it sees the driver container running: a moment after the kubelet
    // reports it; the container mounts its driver root and writes `installed` once it has started, which
    // may come after that.
    eventually(
        [&] {
          return read_file(root + "/run/nvidia/nvidia-driver.state") == digest + "\n" &&
                 node().mounts_at(root + "/run/nvidia/driver") == std::vector<std::string>{"tmpfs"} &&
                 node().read_in_node(root + "/run/nvidia/driver/installed").value_or("") == digest + "\n";
        },
        30);
    EXPECT_EQ(read_file(root + "/run/nvidia/nvidia-driver.state"), digest + "\n");
    EXPECT_EQ(node().mounts_at(root + "/run/nvidia/driver"), std::vector<std::string>{"tmpfs"});
    EXPECT_EQ(node().read_in_node(root + "/run/nvidia/driver/installed").value_or(""), digest + "\n");
  }

  static std::string debug() {
    std::string out = "--- pods\n";
    for (const char* ns : {kOperatorNs, kAppsNs}) {
      out += c().kubectl({"-n", ns, "get", "pods", "-o", "wide"}).out;
    }
    out += "--- node\n" + c().kubectl({"get", "node", kNode, "-o", "json"}).out.substr(0, 3000) + "\n";
    if (auto p = driver_pod()) {
      out += "--- driver pod status\n" + p->value("status", json::object()).dump(1) + "\n";
      const json s = init_status(*p);
      const int restarts = s.is_null() ? 0 : s.value("restartCount", 0);
      out += "--- init container log (run " + std::to_string(restarts) + ")\n" + init_log(*p, restarts);
    }
    out += "--- refcnt " + std::to_string(node().refcnt().value_or(-1)) + "\n";
    return out + node().logs_tail(30);
  }

  static std::unique_ptr<TestCluster> cluster_;
  static std::unique_ptr<RealNode> node_;
};
std::unique_ptr<TestCluster> DriverUpgrade::cluster_;
std::unique_ptr<RealNode> DriverUpgrade::node_;

// A scenario's wall time, printed when it ends.
struct Timer {
  explicit Timer(std::string n) : name(std::move(n)) {}
  ~Timer() {
    std::printf("[ e2e ] %s: %.1f s\n", name.c_str(), seconds_since(t0));
    std::fflush(stdout);
  }
  std::string name;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

TEST_F(DriverUpgrade, UpgradeResetsClientsUnloadsAndBringsEverythingBack) {
  Timer timer("upgrade");
  ASSERT_TRUE(steady()) << debug();
  const auto old = *driver_pod();
  const auto clients_before = uids_of("gpu-metrics");
  const auto workload_before = uids_of("training");
  const size_t audit_from = c().audit_events().size();

  apply_driver("v2");
  delete_driver_pod(old);
  ASSERT_TRUE(eventually([&] { return driver_done(uid(old)); }, 180)) << debug();
  const auto pod = *driver_pod();
  const json s = init_status(pod);
  EXPECT_EQ(s.value("restartCount", -1), 0) << s.dump();
  expect_driver_installed("v2");
  const std::string log = init_log(pod);
  EXPECT_THAT(log, HasSubstr("Unmounting NVIDIA driver rootfs"));
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));

  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
  // Clients and the workload were reset (new pods), by evictions of the driver pod's service account.
  EXPECT_NE(uids_of("gpu-metrics"), clients_before);
  EXPECT_NE(uids_of("training"), workload_before);
  const auto requests = sa_requests(audit_from, true);
  EXPECT_GE(evictions_of(requests, "gpu-metrics-"), 1U);
  EXPECT_GE(evictions_of(requests, "training-"), 1U);
}

TEST_F(DriverUpgrade, InitContainerKilledWhileResettingClientsIsRestartedAndHeals) {
  Timer timer("crash");
  ASSERT_TRUE(steady()) << debug();
  const auto old = *driver_pod();
  apply_driver("v3");
  delete_driver_pod(old);

  // The slow client takes seconds to exit: kill driver-manager while it waits for it, under its taint.
  std::optional<pid_t> pid;
  ASSERT_TRUE(eventually(
      [&] {
        const json n = c().get_json({"node", kNode});
        bool slow_terminating = false;
        for (const auto& p : pods(kAppsNs, "app=gpu-slow-client"))
          slow_terminating = slow_terminating || p["metadata"].contains("deletionTimestamp");
        if (!slow_terminating || !n["spec"].contains("taints")) return false;
        const auto p = driver_pod();
        if (!p) return false;
        const json st = init_status(*p);
        if (st.is_null() || !st.value("state", json::object()).contains("running")) return false;
        pid = node().container_pid(st.value("containerID", ""));
        return pid.has_value();
      },
      120))
      << debug();
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  // A SIGKILL leaves no time to clean up: the taint stays until the restarted run heals it.
  EXPECT_TRUE(c().get_json({"node", kNode})["spec"].contains("taints"));

  // The kubelet reports the killed run (exit code 137) while it backs off, then restarts the container.
  std::optional<int> killed_exit;
  ASSERT_TRUE(eventually(
      [&] {
        if (const auto p = driver_pod()) {
          const json last = init_status(*p).value("lastState", json::object());
          if (last.contains("terminated")) killed_exit = last["terminated"].value("exitCode", -1);
        }
        return driver_done(uid(old));
      },
      180))
      << debug();
  EXPECT_EQ(killed_exit, 137);
  const auto pod = *driver_pod();
  const json s = init_status(pod);
  EXPECT_GE(s.value("restartCount", 0), 1) << s.dump();
  EXPECT_THAT(init_log(pod, 0), Not(HasSubstr("Driver uninstallation completed successfully")));
  expect_driver_installed("v3");
  EXPECT_THAT(init_log(pod, s.value("restartCount", 0)),
              HasSubstr("Driver uninstallation completed successfully"));
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

TEST_F(DriverUpgrade, PodDeletedMidRunCleansUpWithinTheGracePeriodAndIsRecreated) {
  Timer timer("pod deleted mid-run");
  ASSERT_TRUE(steady()) << debug();
  const auto old = *driver_pod();
  apply_driver("v4");
  delete_driver_pod(old);

  // The new pod's driver-manager is resetting clients (node tainted, the slow client terminating): delete it.
  std::optional<json> doomed;
  ASSERT_TRUE(eventually(
      [&] {
        const json n = c().get_json({"node", kNode});
        bool slow_terminating = false;
        for (const auto& p : pods(kAppsNs, "app=gpu-slow-client"))
          slow_terminating = slow_terminating || p["metadata"].contains("deletionTimestamp");
        doomed = driver_pod();
        return slow_terminating && n["spec"].contains("taints") && doomed && uid(*doomed) != uid(old) &&
               init_status(*doomed).value("state", json::object()).contains("running");
      },
      120))
      << debug();
  // The kubelet removes a dead container's log file soon after it exits, before the pod object goes: keep
  // the file open (it stays readable) to read the end of the run.
  std::ifstream log_file(init_log_path(*doomed, 0));
  ASSERT_TRUE(log_file.good()) << init_log_path(*doomed, 0);
  delete_driver_pod(*doomed);

  // The kubelet sent SIGTERM; driver-manager restored the node and exited before the 30 s grace period ran
  // out: its log ends with the end of the cleanup (a SIGKILL would have cut it short).
  std::optional<json> terminated;
  json last_status;  // the init container's last status seen (restarts, last state): shown on a failure
  eventually(
      [&] {
        bool present = false;
        for (const auto& p : pods(kOperatorNs, "app=nvidia-driver-daemonset")) {
          if (uid(p) != uid(*doomed)) continue;
          present = true;
          last_status = init_status(p);
          const json st = last_status.value("state", json::object());
          if (st.contains("terminated")) terminated = st["terminated"];
        }
        return !present;
      },
      60);
  // The container runtime copies the container's output into the log file on its own: the pod object can be
  // gone before the last lines are in the file. Read on until the line that ends every run is there (at most
  // 20 seconds).
  std::string log;
  eventually(
      [&] {
        log_file.clear();  // past the end of what was there: read what came since
        log.append(std::istreambuf_iterator<char>(log_file), std::istreambuf_iterator<char>());
        return log.find("msg=Summary: ") != std::string::npos;
      },
      20);
  EXPECT_THAT(log, HasSubstr("Received SIGTERM: restoring the node before exiting"))
      << "the init container's last status seen: " << last_status.dump();
  EXPECT_THAT(log, HasSubstr("Removing taint"));
  EXPECT_THAT(log, HasSubstr("Rescheduling all GPU clients on the current node"));
  // The end of the cleanup: the error, then the summary line that ends every run.
  const size_t last_start = log.rfind('\n', log.size() - 2) + 1;
  const size_t error_start = log.rfind('\n', last_start - 2) + 1;
  EXPECT_THAT(log.substr(last_start), HasSubstr("msg=Summary: terminated by SIGTERM in phase "))
      << "the last line is not the end of the cleanup:\n"
      << log;
  // The error names the wait SIGTERM cut short (the operand wait, the client reset or the GPU workload
  // eviction, whichever saw it first).
  const std::string error_line = log.substr(error_start, last_start - error_start);
  EXPECT_THAT(error_line, HasSubstr("level=fatal msg=")) << log;
  EXPECT_THAT(error_line, HasSubstr("cancelled")) << log;
  // The kubelet marks a container it killed during a pod's termination as terminated with 137 and reason
  // ContainerStatusUnknown without looking at its real exit status; a real status is 143.
  if (terminated && terminated->value("reason", "") != "ContainerStatusUnknown") {
    EXPECT_EQ(terminated->value("exitCode", -1), 143) << terminated->dump();
  }

  // The DaemonSet controller recreated the pod; the new one completes.
  ASSERT_TRUE(eventually([&] { return driver_done(uid(*doomed)); }, 180)) << debug();
  expect_driver_installed("v4");
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

TEST_F(DriverUpgrade, TaintTheDriverPodDoesNotTolerateIsRefusedBeforeAnyWrite) {
  Timer timer("untolerated taint");
  ASSERT_TRUE(steady()) << debug();
  const auto old = *driver_pod();
  const std::string taint = "nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule";
  apply_driver("v5", {{"GPU_CLIENT_TAINT", taint}});
  const size_t audit_from = c().audit_events().size();
  delete_driver_pod(old);

  // The init container fails (and the kubelet keeps restarting it); nothing on the node changed.
  std::optional<json> pod;
  std::optional<int> exit_code;
  ASSERT_TRUE(eventually(
      [&] {
        pod = driver_pod();
        if (!pod || uid(*pod) == uid(old)) return false;
        const json s = init_status(*pod);
        if (s.is_null()) return false;
        const json last = s.value("lastState", json::object());
        if (last.contains("terminated")) exit_code = last["terminated"].value("exitCode", -1);
        if (auto now = init_exit_code(*pod)) exit_code = now;
        return exit_code.has_value();
      },
      120))
      << debug();
  EXPECT_EQ(exit_code, 1) << debug();
  // The failed run's log (the kubelet may already be running the container again: eventually, from the logs
  // it keeps).
  std::string log;
  EXPECT_TRUE(eventually(
      [&] {
        log = init_logs_kept(*pod);
        return log.find("nvidia.com/gpu-driver-update") != std::string::npos;
      },
      60))
      << log;
  EXPECT_TRUE(sa_requests(audit_from, true).empty()) << sa_requests(audit_from, true).front().dump();
  const json n = c().get_json({"node", kNode});
  EXPECT_FALSE(n["spec"].contains("taints")) << n["spec"].dump();
  EXPECT_TRUE(paused_labels(n).empty());
  EXPECT_EQ(node().refcnt(), kHolders);

  // Back to a configuration that works: the stuck pod is replaced and completes.
  apply_driver("v5");
  delete_driver_pod(*pod);
  ASSERT_TRUE(eventually([&] { return driver_done(uid(*pod)); }, 180)) << debug();
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

TEST_F(DriverUpgrade, UpgradePolicyOnResetsClientsButLeavesWorkloadsAndTheCordonToTheController) {
  Timer timer("upgrade policy");
  ASSERT_TRUE(steady()) << debug();
  const auto old = *driver_pod();
  const auto clients_before = uids_of("gpu-metrics");
  // As the upgrade controller: the policy annotation, a cordon, the GPU workload deleted, then the pod.
  ASSERT_EQ(c().kubectl({"annotate", "node", kNode, "--overwrite", std::string(kUpgradeAnnotation) + "=true"})
                .exit_code,
            0);
  ASSERT_EQ(c().kubectl({"cordon", kNode}).exit_code, 0);
  ASSERT_EQ(c().kubectl({"-n", kAppsNs, "delete", "pod", "-l", "app=training", "--wait=true"}).exit_code, 0);
  const size_t audit_from = c().audit_events().size();
  apply_driver("v6");
  delete_driver_pod(old);

  ASSERT_TRUE(eventually([&] { return driver_done(uid(old)); }, 180)) << debug();
  expect_driver_installed("v6");
  const auto pod = *driver_pod();
  EXPECT_THAT(init_log(pod), HasSubstr("Auto upgrade policy of the GPU driver on the node is enabled"));
  // Clients were reset by driver-manager; the workload was not its business; the cordon is still there.
  const auto requests = sa_requests(audit_from, true);
  EXPECT_GE(evictions_of(requests, "gpu-metrics-"), 1U);
  EXPECT_EQ(evictions_of(requests, "training-"), 0U);
  const json n = c().get_json({"node", kNode});
  EXPECT_TRUE(n["spec"].value("unschedulable", false)) << n["spec"].dump();
  EXPECT_FALSE(n["spec"].contains("taints")) << n["spec"].dump();
  EXPECT_TRUE(paused_labels(n).empty());
  ASSERT_TRUE(eventually([&] {
    const auto now = uids_of("gpu-metrics");
    return !now.empty() && now != clients_before;
  })) << debug();

  // The controller uncordons: the workload comes back and the node is as before.
  ASSERT_EQ(c().kubectl({"uncordon", kNode}).exit_code, 0);
  ASSERT_EQ(c().kubectl({"annotate", "node", kNode, std::string(kUpgradeAnnotation) + "-"}).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

// deploy/plan-job.yaml as a user runs it (`kubectl apply`, then `kubectl logs`), on the real kubelet. Test
// choices, as for the driver DaemonSet: the image built here, and host networking with the API server's
// loopback address (this node has no kube-proxy). The Job's plan covers the node and changes nothing.
TEST_F(DriverUpgrade, PlanJobFromDeployPrintsTheWaveInItsLogAndChangesNothing) {
  Timer timer("plan job");
  ASSERT_TRUE(steady()) << debug();
  const std::string file = source_path("deploy/plan-job.yaml");
  std::string yaml = read_file(file);
  // The Job file carries the plan role of deploy/clusterrole-plan.yaml, rule for rule.
  // kubectl prints one JSON object per document, one after the other.
  const auto objects = [&](const std::string& path) {
    const auto out = c().kubectl({"create", "--dry-run=client", "-o", "json", "-f", path});
    EXPECT_EQ(out.exit_code, 0) << out.err;
    json all = json::array();
    std::istringstream in(out.out);
    while ((in >> std::ws).peek() != std::char_traits<char>::eof()) {
      json one;
      in >> one;
      all.push_back(one);
    }
    return all;
  };
  json job_role;
  for (const auto& o : objects(file)) {
    if (o.value("kind", "") == "ClusterRole") job_role = o;
  }
  const json plan_role = objects(source_path("deploy/clusterrole-plan.yaml"))[0];
  ASSERT_FALSE(job_role.is_null()) << "no ClusterRole in " << file;
  EXPECT_EQ(job_role["metadata"]["name"], plan_role["metadata"]["name"]);
  EXPECT_EQ(job_role["rules"], plan_role["rules"]);

  const auto swap = [&](const std::string& from, const std::string& to) {
    const auto at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << "deploy/plan-job.yaml has no '" << from << "'";
    yaml.replace(at, from.size(), to);
  };
  swap("image: registry.example.com/gpu/driver-manager:0.13.0", "image: localhost/driver-manager:dev");
  swap("      serviceAccountName: driver-manager-plan\n",
       "      serviceAccountName: driver-manager-plan\n      hostNetwork: true\n");
  swap("          env:\n",
       "          env:\n            - name: KUBERNETES_SERVICE_HOST\n              value: "
       "\"127.0.0.1\"\n            - name: KUBERNETES_SERVICE_PORT\n              value: \"" +
           api_port(c()) + "\"\n");
  const std::string applied = make_temp_dir("plan-job") + "/plan-job.yaml";
  write_file(applied, yaml);
  const size_t audit_from = c().audit_events().size();
  const auto apply = c().kubectl({"apply", "-f", applied});
  ASSERT_EQ(apply.exit_code, 0) << apply.err;
  const auto wait = c().kubectl(
      {"-n", kOperatorNs, "wait", "--for=condition=complete", "job/driver-manager-plan", "--timeout=180s"});
  // What `kubectl logs job/driver-manager-plan` shows: here the API server cannot reach the kubelet's log
  // endpoint (docs/control-plane.md, "A real node"), so the kubelet's own file of the Job pod's container,
  // without the CRI prefix of each line (time, stream, tag).
  const json job_pods = pods(kOperatorNs, "job-name=driver-manager-plan");
  ASSERT_EQ(wait.exit_code, 0) << wait.err << debug();
  ASSERT_EQ(job_pods.size(), 1U) << job_pods.dump();
  const json& job_pod = job_pods[0];
  const std::string file_log =
      read_file(node().env("NODE_POD_LOGS") + "/" + kOperatorNs + "_" +
                job_pod["metadata"].value("name", "") + "_" + uid(job_pod) + "/plan/0.log");
  std::string log;
  std::istringstream cri(file_log);
  for (std::string line; std::getline(cri, line);) {
    size_t at = line.find(' ');                                // after the time
    if (at != std::string::npos) at = line.find(' ', at + 1);  // after the stream
    if (at != std::string::npos) at = line.find(' ', at + 1);  // after the tag
    if (at != std::string::npos) log += line.substr(at + 1) + "\n";
  }
  std::printf("%s", log.substr(0, 1500).c_str());

  EXPECT_THAT(log, HasSubstr("Plan for an upgrade wave over 1 node(s) (the nodes with "
                             "nvidia.com/gpu.deploy.driver=true; nothing was changed)"));
  // The node's row: its driver pod runs the DaemonSet's configuration, so the node would take the skip path.
  std::string row;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(std::string(kNode) + " ", 0) == 0) row = line;
  }
  EXPECT_THAT(row, ::testing::MatchesRegex(std::string(kNode) + " +skip +.*")) << log;
  // With the operator's settings for the init container, which the Job carries.
  EXPECT_THAT(log, HasSubstr("Upgrade policy: off; GPU pod eviction: on; auto drain: off")) << log;
  // Every pod on the node is in the node's plan.
  for (const char* ns : {kOperatorNs, kAppsNs}) {
    for (const auto& p : pods(ns)) {
      if (p["metadata"]["labels"].contains("job-name")) continue;
      EXPECT_THAT(log, HasSubstr(std::string(ns) + "/" + p["metadata"].value("name", ""))) << log;
    }
  }
  // Its service account read the cluster and wrote nothing.
  size_t reads = 0;
  const auto events = c().audit_events();
  for (size_t i = audit_from; i < events.size(); ++i) {
    const json& e = events[i];
    if (e.value("stage", "") != "ResponseComplete" ||
        e["user"].value("username", "") != "system:serviceaccount:gpu-operator:driver-manager-plan")
      continue;
    const std::string verb = e.value("verb", "");
    EXPECT_TRUE(verb == "get" || verb == "list" || verb == "watch") << e.dump();
    ++reads;
  }
  EXPECT_GE(reads, 5U) << "the plan's lists, by the Job's service account";

  const auto del = c().kubectl({"delete", "-f", applied, "--cascade=foreground", "--wait=true"});
  EXPECT_EQ(del.exit_code, 0) << del.err;
  ASSERT_TRUE(eventually([&] { return pods(kOperatorNs, "job-name=driver-manager-plan").empty(); }, 60));
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

// A run that fails says why in the pod status, where `kubectl describe pod` and the operator look first: the
// kubelet copies the init container's termination message file into its terminated state.
TEST_F(DriverUpgrade, AFailedInitContainerShowsItsReasonInThePodStatus) {
  Timer timer("termination message");
  ASSERT_TRUE(steady()) << debug();
  const auto old = *driver_pod();
  apply_driver("v7", {{"OPERAND_WAIT_TIMEOUT", "soon"}});
  const size_t audit_from = c().audit_events().size();
  delete_driver_pod(old);

  std::optional<json> pod;
  json terminated;
  int run = 0;
  ASSERT_TRUE(eventually(
      [&] {
        pod = driver_pod();
        if (!pod || uid(*pod) == uid(old)) return false;
        const json s = init_status(*pod);
        if (s.is_null()) return false;
        const int restarts = s.value("restartCount", 0);
        if (s.value("state", json::object()).contains("terminated")) {
          terminated = s["state"]["terminated"];
          run = restarts;
        } else if (s.value("lastState", json::object()).contains("terminated")) {
          terminated = s["lastState"]["terminated"];
          run = restarts - 1;
        }
        return !terminated.is_null();
      },
      120))
      << debug();
  EXPECT_EQ(terminated.value("exitCode", -1), 1) << terminated.dump();
  const std::string message = terminated.value("message", "");
  // The same words as the log's last fatal line (the run's reason), on one line.
  const std::string log = init_log(*pod, run);
  const auto fatal = log.rfind("level=fatal msg=");
  ASSERT_NE(fatal, std::string::npos) << log;
  std::string reason = log.substr(fatal + std::string("level=fatal msg=").size());
  reason = reason.substr(0, reason.find('\n'));
  EXPECT_THAT(reason, HasSubstr("OPERAND_WAIT_TIMEOUT")) << log;
  EXPECT_EQ(message, reason) << terminated.dump() << "\n" << log;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  const auto describe =
      c().kubectl({"-n", kOperatorNs, "describe", "pod", pod->at("metadata").value("name", "")});
  EXPECT_THAT(describe.out, HasSubstr("Message:")) << describe.out;
  EXPECT_THAT(describe.out, HasSubstr(reason)) << describe.out;
  // A bad setting is refused before any API request.
  EXPECT_TRUE(sa_requests(audit_from, false).empty()) << sa_requests(audit_from, false).front().dump();

  apply_driver("v7");
  delete_driver_pod(*pod);
  ASSERT_TRUE(eventually([&] { return driver_done(uid(*pod)); }, 180)) << debug();
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

}  // namespace
}  // namespace dm::test
