// DRA on the real node: a real DRA driver (the example driver's kubelet plugin under the driver name
// gpu.nvidia.com, deployed as the GPU Operator deploys NVIDIA's) publishes simulated GPUs; GPU workloads get
// them through ResourceClaims that the real scheduler allocates and the real kubelet has the plugin prepare
// (containerd applies each claim's CDI spec to the container). driver-manager runs as the init container of
// the driver DaemonSet, with DRA on through the node label nvidia.com/gpu.deploy.dra-driver.
//
// node-sim counts a running pod holding an allocated gpu.nvidia.com claim in the nvidia refcount, and the
// plugin's own pod (it holds the GPUs while it runs, as NVIDIA's does): an unload succeeds only once both are
// gone. Each scenario starts from the same steady state and installs a new driver configuration digest.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "support/cluster.h"
#include "support/process.h"
#include "support/real_node.h"

namespace dm::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kNode = "gpu-node-1";
constexpr const char* kOperatorNs = "gpu-operator";
constexpr const char* kAppsNs = "gpu-apps";
constexpr const char* kInit = "k8s-driver-manager";
constexpr const char* kDriverSa = "system:serviceaccount:gpu-operator:nvidia-driver";
constexpr const char* kPluginSelector = "app=nvidia-dra-driver-kubelet-plugin";
constexpr const char* kDraLabel = "nvidia.com/gpu.deploy.dra-driver";
constexpr const char* kUpgradeAnnotation = "nvidia.com/gpu-driver-upgrade-enabled";
constexpr const char* kDevices = "4";
// The steady state's holders of the simulated driver: the plugin's pod and the claim-holding workload.
constexpr int kHolders = 2;
// The exit code ctest counts as skipped (tests/CMakeLists.txt).
constexpr int kSkipped = 77;

using Clock = std::chrono::steady_clock;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A scenario's wall time, printed when it ends.
struct Timer {
  explicit Timer(std::string n) : name(std::move(n)) {}
  ~Timer() {
    std::printf("[ e2e dra ] %s: %.1f s\n", name.c_str(), seconds_since(t0));
    std::fflush(stdout);
  }
  std::string name;
  Clock::time_point t0 = Clock::now();
};

std::string name_of(const json& o) {
  return o["metadata"].value("name", "");
}
std::string uid(const json& o) {
  return o["metadata"].value("uid", "");
}
bool terminating(const json& o) {
  return o["metadata"].contains("deletionTimestamp");
}

// Where in `log` `what` is first said (npos: not said).
size_t said_at(const std::string& log, const std::string& what) {
  return log.find(what);
}

class Dra : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto t0 = Clock::now();
    cluster_ = TestCluster::start();
    // The example driver speaks resource.k8s.io/v1, served since Kubernetes 1.34: an older control plane
    // (scripts/k8s-matrix 1.33) cannot run these scenarios, and the test says so as skipped (ctest's
    // SKIP_RETURN_CODE).
    if (c().kubectl({"get", "--raw", "/apis/resource.k8s.io/v1"}).exit_code != 0) {
      std::printf("[ e2e dra ] SKIPPED: the control plane does not serve resource.k8s.io/v1\n");
      std::fflush(stdout);
      cluster_.reset();
      std::exit(kSkipped);
    }
    node_ = std::make_unique<RealNode>(*cluster_, kNode, std::string(),
                                       std::map<std::string, std::string>{{"NODE_DRA", "1"}});
    std::printf("[ e2e dra ] cluster and real node up in %.1f s\n", seconds_since(t0));
    c().apply(std::string("apiVersion: v1\nkind: Namespace\nmetadata: {name: ") + kOperatorNs +
              "}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: " + kAppsNs + "}\n");
    for (const char* ns : {kOperatorNs, kAppsNs}) {
      ASSERT_TRUE(eventually([&] {
        return !c().kubectl({"-n", ns, "get", "sa", "default", "-o", "jsonpath={.metadata.name}"})
                    .out.empty();
      }));
    }
    // The driver's service account: the e2e tests' stock role (an earlier operator's, without claims) plus
    // the claims rule the GPU Operator v26.7's stock role has, which driver-manager needs with DRA on.
    c().apply(read_file(source_path("tests/fixtures/e2e/clusterrole-nvidia-driver.yaml")));
    c().apply(
        std::string("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: nvidia-driver, namespace: ") +
        kOperatorNs +
        "}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: "
        "e2e-nvidia-driver}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "
        "e2e-nvidia-driver}\nsubjects: [{kind: ServiceAccount, name: nvidia-driver, namespace: " +
        kOperatorNs +
        "}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: "
        "e2e-nvidia-driver-claims}\nrules: [{apiGroups: [resource.k8s.io], resources: [resourceclaims], "
        "verbs: [get, list]}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
        "metadata: {name: e2e-nvidia-driver-claims}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: "
        "ClusterRole, name: e2e-nvidia-driver-claims}\nsubjects: [{kind: ServiceAccount, name: "
        "nvidia-driver, namespace: " +
        kOperatorNs + "}]\n");
    ASSERT_EQ(c().kubectl({"label", "node", kNode, "--overwrite", "nvidia.com/gpu.deploy.driver=true",
                           std::string(kDraLabel) + "=true"})
                  .exit_code,
              0);
    apply_driver("v1");
    ASSERT_TRUE(eventually([&] { return driver_done(); }, 180)) << debug();
    // The DRA driver once the simulated driver is loaded (the GPU Operator's plugin waits for the driver).
    c().apply(fill(read_file(source_path("tests/fixtures/e2e/dra-driver.yaml"))));
    ASSERT_TRUE(eventually([&] { return !slice_devices().empty(); }, 120)) << debug();
    EXPECT_EQ(slice_devices().size(), std::stoul(kDevices)) << debug();
    c().apply(fill(read_file(source_path("tests/fixtures/e2e/dra-workloads.yaml"))));
    ASSERT_TRUE(eventually([&] { return steady(); }, 180)) << debug();
    std::printf(
        "[ e2e dra ] steady state (driver v1, plugin, claim-holding workload, refcount %d) after %.1f s\n",
        kHolders, seconds_since(t0));
  }
  static void TearDownTestSuite() {
    node_.reset();
    cluster_.reset();
  }

  static TestCluster& c() { return *cluster_; }
  static RealNode& node() { return *node_; }

  static std::string api_port() {
    const std::string url = read_file(c().state_dir() + "/apiserver.url");
    std::string port = url.substr(url.rfind(':') + 1);
    while (!port.empty() && (port.back() == '\n' || port.back() == '\r')) port.pop_back();
    return port;
  }
  static std::string fill(std::string yaml) {
    yaml = replace_all(yaml, "@NAMESPACE@", kOperatorNs);
    yaml = replace_all(yaml, "@CLIENT_NS@", kAppsNs);
    yaml = replace_all(yaml, "@NODE@", kNode);
    yaml = replace_all(yaml, "@SIM_ROOT@", node().sim_root());
    yaml = replace_all(yaml, "@API_PORT@", api_port());
    yaml = replace_all(yaml, "@KUBELET_ROOT@", node().env("NODE_KUBELET_ROOT"));
    yaml = replace_all(yaml, "@CDI_DIR@", node().env("NODE_CDI_DIR"));
    return replace_all(yaml, "@DEVICES@", kDevices);
  }
  // The driver DaemonSet with configuration digest `digest`.
  static void apply_driver(const std::string& digest) {
    std::string yaml = read_file(source_path("tests/fixtures/e2e/driver-daemonset.yaml"));
    yaml = replace_all(yaml, "@EXTRA_ENV@", "");
    c().apply(replace_all(fill(yaml), "@DIGEST@", digest));
  }

  static json pods(const std::string& ns, const std::string& selector) {
    auto out = c().kubectl({"-n", ns, "get", "pods", "-o", "json", "-l", selector});
    return out.exit_code == 0 ? json::parse(out.out)["items"] : json::array();
  }
  // The one pod matching `selector` that is not terminating.
  static std::optional<json> live_pod(const std::string& ns, const std::string& selector) {
    for (const auto& p : pods(ns, selector)) {
      if (!terminating(p)) return p;
    }
    return std::nullopt;
  }
  static std::optional<json> driver_pod() { return live_pod(kOperatorNs, "app=nvidia-driver-daemonset"); }
  static std::optional<json> plugin_pod() { return live_pod(kOperatorNs, kPluginSelector); }
  static std::optional<json> workload_pod() { return live_pod(kAppsNs, "app=dra-training"); }

  static json container_status(const json& pod, const char* list, const std::string& name) {
    for (const auto& s : pod["status"].value(list, json::array())) {
      if (s.value("name", "") == name) return s;
    }
    return nullptr;
  }
  static bool running(const json& pod, const std::string& container) {
    const json s = container_status(pod, "containerStatuses", container);
    return !s.is_null() && s.value("state", json::object()).contains("running");
  }
  static std::optional<int> init_exit_code(const json& pod) {
    const json s = container_status(pod, "initContainerStatuses", kInit);
    if (s.is_null() || !s.value("state", json::object()).contains("terminated")) return std::nullopt;
    return s["state"]["terminated"].value("exitCode", -1);
  }
  static bool driver_done(const std::string& not_uid = {}) {
    const auto p = driver_pod();
    return p && uid(*p) != not_uid && init_exit_code(*p) == 0 && running(*p, "nvidia-driver-ctr");
  }
  static std::string init_log(const json& pod, int restart = 0) {
    const std::string path = node().env("NODE_POD_LOGS") + "/" + kOperatorNs + "_" + name_of(pod) + "_" +
                             uid(pod) + "/" + kInit + "/" + std::to_string(restart) + ".log";
    return std::filesystem::exists(path) ? read_file(path) : std::string();
  }

  // The devices the driver published for the node (its ResourceSlices).
  static std::vector<std::string> slice_devices() {
    std::vector<std::string> out;
    const auto r = c().kubectl({"get", "resourceslices", "-o", "json"});
    if (r.exit_code != 0) return out;
    const json slices = json::parse(r.out);
    for (const auto& s : slices["items"]) {
      const json& spec = s["spec"];
      if (spec.value("driver", "") != "gpu.nvidia.com" || spec.value("nodeName", "") != kNode) continue;
      for (const auto& d : spec.value("devices", json::array())) out.push_back(d.value("name", ""));
    }
    return out;
  }

  // The ResourceClaim made for `pod` from its template (null until the controller made it).
  static json claim_of(const json& pod) {
    for (const auto& s : pod["status"].value("resourceClaimStatuses", json::array())) {
      if (!s.contains("resourceClaimName")) continue;
      const auto r = c().kubectl({"-n", pod["metadata"].value("namespace", ""), "get", "resourceclaim",
                                  s.value("resourceClaimName", ""), "-o", "json"});
      if (r.exit_code == 0) return json::parse(r.out);
    }
    return nullptr;
  }
  // The claim is allocated a device of gpu.nvidia.com on this node and reserved for `pod`.
  static bool allocated_for(const json& claim, const json& pod) {
    if (claim.is_null()) return false;
    const json st = claim.value("status", json::object());
    bool gpu = false;
    for (const auto& r : st.value("allocation", json::object())
                             .value("devices", json::object())
                             .value("results", json::array())) {
      gpu = gpu || (r.value("driver", "") == "gpu.nvidia.com" && r.value("pool", "") == kNode);
    }
    bool reserved = false;
    for (const auto& r : st.value("reservedFor", json::array()))
      reserved = reserved || r.value("uid", "") == uid(pod);
    return gpu && reserved;
  }
  // The plugin prepared the claim: its CDI spec for the claim is in the node's CDI directory.
  static bool cdi_spec_present(const std::string& claim_uid) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(node().env("NODE_CDI_DIR"), ec)) {
      if (e.path().filename().string().find(claim_uid) != std::string::npos) return true;
    }
    return false;
  }
  // containerd applied the claim's CDI spec to the container: its main process has the environment the
  // spec adds (the driver's name, the device allocated, the claim).
  static std::string container_environ(const json& pod, const std::string& container) {
    const json s = container_status(pod, "containerStatuses", container);
    if (s.is_null()) return {};
    const auto pid = node().container_pid(s.value("containerID", ""));
    if (!pid) return {};
    std::string env = read_file("/proc/" + std::to_string(*pid) + "/environ");
    for (char& ch : env) {
      if (ch == '\0') ch = '\n';
    }
    return env;
  }
  static bool claim_in_container(const json& pod, const json& claim) {
    const std::string env = container_environ(pod, "train");
    return env.find("DRA_RESOURCE_DRIVER_NAME=gpu.nvidia.com\n") != std::string::npos &&
           env.find("_RESOURCE_CLAIM=" + uid(claim) + "\n") != std::string::npos;
  }
  // The pods the simulated driver counts as its users ("ns/name" lines).
  static std::string driver_users() {
    const std::string path = node().sim_root() + "/sys/module/nvidia/users";
    return std::filesystem::exists(path) ? read_file(path) : std::string();
  }

  // The workload runs with its claim allocated, prepared and applied, and counted by the simulated driver.
  static bool workload_holds_claim(const json& pod) {
    if (!running(pod, "train")) return false;
    const json claim = claim_of(pod);
    return allocated_for(claim, pod) && cdi_spec_present(uid(claim)) && claim_in_container(pod, claim) &&
           driver_users().find(std::string(kAppsNs) + "/" + name_of(pod) + "\n") != std::string::npos;
  }

  // Everything is back: the driver done, the plugin running, the workload holding a prepared claim, the
  // refcount of the steady state, the node neither tainted nor cordoned, the DRA label as the operator set
  // it.
  static bool steady(int holders = kHolders) {
    if (!driver_done()) return false;
    const auto plugin = plugin_pod();
    const auto work = workload_pod();
    if (!plugin || !running(*plugin, "plugin") || !work || !workload_holds_claim(*work)) return false;
    if (node().refcnt() != holders) return false;
    const json n = c().get_json({"node", kNode});
    return !n["spec"].value("unschedulable", false) && !n["spec"].contains("taints") &&
           n["metadata"]["labels"].value(kDraLabel, "") == "true";
  }

  // The driver pod's requests from audit index `from` on that evicted a pod named `prefix`*.
  static size_t evictions_of(size_t from, const std::string& prefix) {
    size_t n = 0;
    const auto events = c().audit_events();
    for (size_t i = from; i < events.size(); ++i) {
      const auto& e = events[i];
      if (e.value("stage", "") != "ResponseComplete" || e["user"].value("username", "") != kDriverSa)
        continue;
      const json& o = e.value("objectRef", json::object());
      if (o.value("subresource", "") == "eviction" && o.value("name", "").rfind(prefix, 0) == 0) ++n;
    }
    return n;
  }

  // Replaces the driver pod (the DaemonSet is OnDelete) with one of configuration `digest`.
  static json start_upgrade(const std::string& digest) {
    const auto old = driver_pod();
    EXPECT_TRUE(old.has_value());
    apply_driver(digest);
    EXPECT_EQ(c().kubectl({"-n", kOperatorNs, "delete", "pod", name_of(*old), "--wait=false"}).exit_code, 0);
    return *old;
  }

  static std::string debug() {
    std::string out = "--- pods\n";
    for (const char* ns : {kOperatorNs, kAppsNs})
      out += c().kubectl({"-n", ns, "get", "pods", "-o", "wide"}).out;
    out += "--- claims\n" + c().kubectl({"get", "resourceclaims", "-A", "-o", "wide"}).out;
    out += "--- slices\n" + c().kubectl({"get", "resourceslices", "-o", "wide"}).out;
    out += "--- node labels\n" + c().get_json({"node", kNode})["metadata"]["labels"].dump() + "\n";
    if (auto p = driver_pod()) {
      const json s = container_status(*p, "initContainerStatuses", kInit);
      const int restarts = s.is_null() ? 0 : s.value("restartCount", 0);
      out += "--- init container log (run " + std::to_string(restarts) + ")\n" + init_log(*p, restarts);
    }
    out += "--- refcnt " + std::to_string(node().refcnt().value_or(-1)) + ", users:\n" + driver_users();
    return out + node().logs_tail(30);
  }

  static std::unique_ptr<TestCluster> cluster_;
  static std::unique_ptr<RealNode> node_;
};
std::unique_ptr<TestCluster> Dra::cluster_;
std::unique_ptr<RealNode> Dra::node_;

// The workload holding a prepared claim is evicted by driver-manager before the unload; the plugin
// unprepared its claim (the CDI spec is gone) and the unload succeeded once it was gone.
TEST_F(Dra, ClaimHoldingWorkloadIsEvictedBeforeTheUnload) {
  Timer timer("claim-holding workload evicted");
  ASSERT_TRUE(steady()) << debug();
  const json work = *workload_pod();
  const json claim = claim_of(work);
  const size_t audit_from = c().audit_events().size();
  const json old = start_upgrade("v2");

  // While the run goes on: the claim is unprepared (its CDI spec removed by the plugin) before the run
  // says it unloads the driver.
  bool unprepared_before_unload = false;
  ASSERT_TRUE(eventually(
      [&] {
        const auto p = driver_pod();
        if (p && uid(*p) != uid(old) && !cdi_spec_present(uid(claim)) &&
            said_at(init_log(*p), "Unloading NVIDIA driver kernel modules") == std::string::npos)
          unprepared_before_unload = true;
        return driver_done(uid(old));
      },
      180))
      << debug();
  EXPECT_TRUE(unprepared_before_unload);
  const std::string log = init_log(*driver_pod());
  EXPECT_GE(evictions_of(audit_from, "dra-training-"), 1U);
  EXPECT_THAT(log, HasSubstr("GPU pod - " + std::string(kAppsNs) + "/" + name_of(work)));
  const size_t evicted = said_at(log, "Deleting GPU pods");
  const size_t unload = said_at(log, "Unloading NVIDIA driver kernel modules");
  ASSERT_NE(evicted, std::string::npos) << log;
  ASSERT_NE(unload, std::string::npos) << log;
  EXPECT_LT(evicted, unload) << log;
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));
  // The claim went with its pod: unprepared (no CDI spec), then deleted by the resourceclaim controller.
  EXPECT_FALSE(cdi_spec_present(uid(claim)));
  ASSERT_TRUE(eventually([&] {
    return c().kubectl({"-n", kAppsNs, "get", "resourceclaim", name_of(claim)}).exit_code != 0;
  })) << debug();
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

// The plugin goes last: after the claim holders are gone and their claims unprepared (by the plugin), before
// the unload; afterwards it is back, registered with the kubelet again: the workload's next claim is prepared
// through it.
TEST_F(Dra, PluginIsDrainedLastAndComesBack) {
  Timer timer("plugin drained last");
  ASSERT_TRUE(steady()) << debug();
  const json plugin = *plugin_pod();
  const json work = *workload_pod();
  const json claim = claim_of(work);
  const json old = start_upgrade("v3");

  // The order as the node saw it, polled: the workload gone and its claim unprepared before the plugin's
  // pod is deleted. Each poll looks at the later event first (the plugin, then the claim, then the workload),
  // so the polling itself cannot invert the order: an earlier event first seen in the same poll gets the
  // same time.
  std::optional<double> workload_gone, claim_unprepared, plugin_deleted;
  const auto t0 = Clock::now();
  ASSERT_TRUE(eventually(
      [&] {
        const double t = seconds_since(t0);
        bool plugin_live = false;
        for (const auto& p : pods(kOperatorNs, kPluginSelector))
          plugin_live = plugin_live || (uid(p) == uid(plugin) && !terminating(p));
        if (!plugin_live && !plugin_deleted) plugin_deleted = t;
        if (!cdi_spec_present(uid(claim)) && !claim_unprepared) claim_unprepared = t;
        bool work_there = false;
        for (const auto& p : pods(kAppsNs, "app=dra-training"))
          work_there = work_there || uid(p) == uid(work);
        if (!work_there && !workload_gone) workload_gone = t;
        return driver_done(uid(old));
      },
      180, std::chrono::milliseconds(50)))
      << debug();
  ASSERT_TRUE(workload_gone && claim_unprepared && plugin_deleted) << debug();
  EXPECT_LE(*workload_gone, *plugin_deleted);
  EXPECT_LE(*claim_unprepared, *plugin_deleted);
  const std::string log = init_log(*driver_pod());
  const size_t guard = said_at(log, "Checking that no pod on the node still holds a GPU resource claim");
  const size_t drain = said_at(log, "Draining the DRA kubelet-plugin");
  const size_t unload = said_at(log, "Unloading NVIDIA driver kernel modules");
  ASSERT_NE(guard, std::string::npos) << log;
  ASSERT_NE(drain, std::string::npos) << log;
  EXPECT_LT(guard, drain) << log;
  EXPECT_LT(drain, unload) << log;

  // Back: a new plugin pod (the label restored), the only one there is, so the workload's new pod's claim
  // (steady(): allocated, CDI spec written, applied to the container) was prepared through it.
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
  EXPECT_NE(uid(*plugin_pod()), uid(plugin));
  EXPECT_NE(uid(*workload_pod()), uid(work));
  EXPECT_EQ(pods(kOperatorNs, kPluginSelector).size(), 1U);
  EXPECT_EQ(slice_devices().size(), std::stoul(kDevices));
}

// A claim this run may not evict: with the upgrade controller's policy on, GPU workloads are the controller's
// to remove, and one holding a prepared claim is still there. The claim guard refuses the run before the
// plugin or the driver is touched, and the node is restored with the workload, its claim and the plugin
// untouched.
TEST_F(Dra, ClaimGuardRefusesAClaimTheRunCannotEvictAndRestoresTheNode) {
  Timer timer("claim guard");
  ASSERT_TRUE(steady()) << debug();
  const json plugin = *plugin_pod();
  const json work = *workload_pod();
  const json claim = claim_of(work);
  ASSERT_EQ(c().kubectl({"annotate", "node", kNode, "--overwrite", std::string(kUpgradeAnnotation) + "=true"})
                .exit_code,
            0);
  const size_t audit_from = c().audit_events().size();
  const json old = start_upgrade("v4");

  // The init container fails on the guard (the kubelet then restarts it, and it fails again).
  std::optional<json> pod;
  std::optional<int> exit_code;
  ASSERT_TRUE(eventually(
      [&] {
        pod = driver_pod();
        if (!pod || uid(*pod) == uid(old)) return false;
        const json s = container_status(*pod, "initContainerStatuses", kInit);
        if (s.is_null()) return false;
        const json last = s.value("lastState", json::object());
        if (last.contains("terminated")) exit_code = last["terminated"].value("exitCode", -1);
        if (auto now = init_exit_code(*pod)) exit_code = now;
        return exit_code.has_value();
      },
      180))
      << debug();
  EXPECT_EQ(exit_code, 1);
  const std::string log = init_log(*pod);
  EXPECT_THAT(log, HasSubstr("cannot drain the DRA kubelet-plugin: pod(s) still hold GPU resource claims: " +
                             std::string(kAppsNs) + "/" + name_of(work)))
      << log;
  EXPECT_EQ(said_at(log, "Draining the DRA kubelet-plugin"), std::string::npos) << log;
  EXPECT_EQ(said_at(log, "Unloading NVIDIA driver kernel modules"), std::string::npos) << log;
  EXPECT_EQ(evictions_of(audit_from, "dra-training-"), 0U);

  // Restored: not tainted, the DRA label as it was, the same plugin pod, the workload and its prepared claim
  // untouched, the driver still loaded with both holders.
  const json n = c().get_json({"node", kNode});
  EXPECT_FALSE(n["spec"].contains("taints")) << n["spec"].dump();
  EXPECT_FALSE(n["spec"].value("unschedulable", false)) << n["spec"].dump();
  EXPECT_EQ(n["metadata"]["labels"].value(kDraLabel, ""), "true") << n["metadata"]["labels"].dump();
  ASSERT_TRUE(plugin_pod().has_value());
  EXPECT_EQ(uid(*plugin_pod()), uid(plugin));
  EXPECT_TRUE(running(*plugin_pod(), "plugin"));
  ASSERT_TRUE(workload_pod().has_value());
  EXPECT_EQ(uid(*workload_pod()), uid(work));
  EXPECT_TRUE(workload_holds_claim(*workload_pod())) << debug();
  EXPECT_EQ(uid(claim_of(*workload_pod())), uid(claim));
  EXPECT_EQ(node().refcnt(), kHolders);

  // Without the policy the next driver pod evicts the workload itself and completes.
  ASSERT_EQ(c().kubectl({"annotate", "node", kNode, std::string(kUpgradeAnnotation) + "-"}).exit_code, 0);
  start_upgrade("v4");
  ASSERT_TRUE(eventually([&] { return driver_done(uid(*pod)); }, 180)) << debug();
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
}

// After the upgrade the workload's new pod gets a new claim, allocated by the scheduler from the devices the
// plugin published again, prepared by the new plugin pod, applied to its container and counted by the
// simulated driver the new driver pod loaded.
TEST_F(Dra, ClaimIsPreparedAgainAfterTheUpgrade) {
  Timer timer("claim prepared again");
  ASSERT_TRUE(steady()) << debug();
  const json plugin = *plugin_pod();
  const json work = *workload_pod();
  const json claim = claim_of(work);
  const json old = start_upgrade("v5");
  ASSERT_TRUE(eventually([&] { return driver_done(uid(old)); }, 180)) << debug();
  ASSERT_TRUE(eventually([&] { return steady(); }, 120)) << debug();
  EXPECT_EQ(read_file(node().sim_root() + "/run/nvidia/nvidia-driver.state"), "v5\n");

  const json now = *workload_pod();
  const json new_claim = claim_of(now);
  EXPECT_NE(uid(now), uid(work));
  EXPECT_NE(uid(new_claim), uid(claim));
  EXPECT_NE(uid(*plugin_pod()), uid(plugin));
  EXPECT_TRUE(allocated_for(new_claim, now)) << new_claim.dump();
  EXPECT_TRUE(cdi_spec_present(uid(new_claim)));
  EXPECT_TRUE(claim_in_container(now, new_claim)) << container_environ(now, "train");
  EXPECT_FALSE(cdi_spec_present(uid(claim)));
  EXPECT_THAT(driver_users(), HasSubstr(std::string(kAppsNs) + "/" + name_of(now) + "\n"));
  EXPECT_EQ(node().refcnt(), kHolders);
}

}  // namespace
}  // namespace dm::test
