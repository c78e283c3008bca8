// The steps that are functions over the run's environment (manager/commands/env_steps.h), each run alone:
// a host of the test's own that records what it is asked, the in-memory cluster for the node and its pods,
// a FakeClock.
#include "manager/commands/env_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/api.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/node/undo.h"
#include "manager/pods/gpu_clients.h"
#include "manager/pods/pod_watch.h"
#include "support/doubles.h"
#include "support/memory_cluster.h"

namespace dm::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A host that answers from its fields and records what it is asked to do.
class RecordingHost final : public host::Host {
 public:
  std::set<std::string> loaded;
  Status unload_nvidia = ok_status();
  Status unload_one = ok_status();
  Status unmount = ok_status();
  host::CommandResult command{.exit_code = 0, .output = ""};
  std::optional<std::string> mellanox;
  bool mofed = false;

  std::vector<std::string> calls;  // "unload-nvidia", "unload nouveau", "unmount", "remove-pid", "run ..."

  host::CommandResult run(const std::vector<std::string>& argv) override {
    std::string line = "run";
    for (const auto& a : argv) line += " " + a;
    calls.push_back(line);
    return command;
  }
  [[nodiscard]] std::string path(std::string_view host_path) const override { return std::string(host_path); }
  [[nodiscard]] bool module_loaded(std::string_view name) const override {
    return loaded.count(std::string(name)) > 0;
  }
  [[nodiscard]] Result<host::ModuleState> module_state(std::string_view name) const override {
    host::ModuleState state;
    state.name = std::string(name);
    state.loaded = module_loaded(name);
    return state;
  }
  [[nodiscard]] Status can_unload_nvidia() const override { return ok_status(); }
  Status unload_nvidia_modules() override {
    calls.emplace_back("unload-nvidia");
    return unload_nvidia;
  }
  [[nodiscard]] std::vector<host::HolderProcess> nvidia_holder_processes() const override { return {}; }
  [[nodiscard]] std::optional<std::string> own_pod_uid() const override { return std::nullopt; }
  [[nodiscard]] std::string nvidia_modules_table() const override { return ""; }
  Status unload_module(std::string_view name) override {
    calls.push_back("unload " + std::string(name));
    return unload_one;
  }
  Status unmount_driver_root() override {
    calls.emplace_back("unmount");
    return unmount;
  }
  void remove_pid_file() override { calls.emplace_back("remove-pid"); }
  [[nodiscard]] Result<std::optional<std::string>> read_driver_state() const override {
    return std::optional<std::string>();
  }
  std::optional<std::string> host_driver_version() override { return std::nullopt; }
  [[nodiscard]] std::optional<std::string> first_mellanox_device() const override { return mellanox; }
  [[nodiscard]] bool mofed_ready(host::Mofed /*mofed*/) const override { return mofed; }
};

// One step's environment: node n1 in the in-memory cluster, the run's writers, pod watch and client reset
// on it.
struct Bench {
  explicit Bench(CancelToken token = CancelToken())
      : cancel(std::move(token)),
        node(cluster, clock, cancel, "n1"),
        taint(cluster, clock, cancel, "n1"),
        pods(cluster, clock, "n1"),
        ctx{settings, cluster, clock, cancel, node, pods},
        clients(cluster, pods, clock, cancel, settings, undo, taint),
        env{ctx, host, clients} {
    settings.node_name = "n1";
    EXPECT_TRUE(cluster.create(kube::paths::nodes(),
                               {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}));
  }
  // The pod watch's first list, as the run takes it before any step.
  void watch_pods() { ASSERT_TRUE(pods.start(Deadline::none(), cancel)); }
  // A running pod of n1 in namespace "work" (the JSON of `spec` merged into its spec).
  void add_pod(const std::string& name, const nlohmann::json& spec = nlohmann::json::object()) {
    nlohmann::json pod = {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", {{"name", name}, {"namespace", "work"}}},
                          {"spec",
                           {{"nodeName", "n1"},
                            {"containers", nlohmann::json::array({{{"name", "main"}, {"image", "app:1"}}})}}},
                          {"status", {{"phase", "Running"}}}};
    pod["spec"].update(spec);
    cluster.apply(pod);
  }
  Settings settings;
  test::MemoryCluster cluster;
  test::FakeClock clock;
  CancelToken cancel;
  NodeOps node;
  TaintOps taint;
  PodWatch pods;
  DrainContext ctx;
  UndoList undo;
  GpuClientReset clients;
  RecordingHost host;
  StepEnv env;
  test::LogCapture log;
};

TEST(HostSteps, UnbindVfioRunsVfioManageAndLogsItsOutput) {
  Bench b;
  b.settings.vfio_manage = "/opt/vfio-manage";
  b.host.command = {.exit_code = 0, .output = "unbound 0000:01:00.0\n\nunbound 0000:02:00.0\n"};
  ASSERT_TRUE(unbind_vfio(b.env));
  EXPECT_THAT(b.host.calls, ElementsAre("run /opt/vfio-manage unbind --all"));
  EXPECT_THAT(b.log.text(), HasSubstr("info vfio-manage: unbound 0000:01:00.0\n"));
  EXPECT_THAT(b.log.text(), HasSubstr("info vfio-manage: unbound 0000:02:00.0\n"));
}

TEST(HostSteps, UnbindVfioFailsWithTheExitCodeOrWhenItCannotRun) {
  Bench b;
  b.host.command = {.exit_code = 3, .output = "no such device\n"};
  auto failed = unbind_vfio(b.env);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "vfio-manage unbind --all failed with exit code 3");
  EXPECT_THAT(b.log.text(), HasSubstr("error Unable to unbind vfio-pci driver from all devices"));
  b.host.command = {.exit_code = -1, .output = ""};
  auto missing = unbind_vfio(b.env);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "could not run vfio-manage (set VFIO_MANAGE_PATH)");
}

TEST(HostSteps, UnloadNouveauOnlyWhenLoaded) {
  Bench b;
  ASSERT_TRUE(unload_nouveau(b.env));
  EXPECT_THAT(b.host.calls, IsEmpty());
  b.host.loaded.insert("nouveau");
  ASSERT_TRUE(unload_nouveau(b.env));
  EXPECT_THAT(b.host.calls, ElementsAre("unload nouveau"));
  b.host.unload_one = Error("in use by pid 7");
  auto s = unload_nouveau(b.env);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "failed to unload the nouveau driver: in use by pid 7");
}

TEST(HostSteps, TheStaleDriverRootGoesWithItsPidFileOnlyOnceUnmounted) {
  Bench b;
  ASSERT_TRUE(remove_stale_driver_root(b.env));
  EXPECT_THAT(b.host.calls, ElementsAre("unmount", "remove-pid"));
  b.host.calls.clear();
  b.host.unmount = Error("device busy");
  auto s = remove_stale_driver_root(b.env);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "failed to unmount the NVIDIA driver rootfs: device busy");
  EXPECT_THAT(b.host.calls, ElementsAre("unmount"));
}

TEST(HostSteps, TheUnloadUnmountsTheDriverRootOnlyAfterTheModulesWent) {
  Bench b;
  ASSERT_TRUE(unload_nvidia_modules(b.env));
  EXPECT_THAT(b.host.calls, ElementsAre("unload-nvidia", "unmount", "remove-pid"));
  EXPECT_THAT(b.log.text(), HasSubstr("info Cleaning up NVIDIA driver\n"));
  b.host.calls.clear();
  b.host.unload_nvidia = Error("nvidia is in use");
  auto s = unload_nvidia_modules(b.env);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message,
              HasSubstr("failed to unload NVIDIA driver kernel modules: nvidia is in use"));
  EXPECT_THAT(b.host.calls, ElementsAre("unload-nvidia"));
}

TEST(HostSteps, TheMofedWaitAsksOnlyWithRdmaOnAndAMellanoxDevice) {
  Bench b;
  ASSERT_TRUE(wait_for_mofed(b.env));
  EXPECT_THAT(b.log.text(), Not(HasSubstr("Mellanox")));
  b.settings.gpu_direct_rdma_enabled = true;
  ASSERT_TRUE(wait_for_mofed(b.env));
  EXPECT_THAT(b.log.text(), HasSubstr("info No Mellanox devices were found"));
  b.host.mellanox = "0000:3b:00.0";
  b.host.mofed = true;
  ASSERT_TRUE(wait_for_mofed(b.env));
  EXPECT_THAT(b.log.text(), HasSubstr("info Mellanox device found at 0000:3b:00.0"));
  EXPECT_THAT(b.log.text(), HasSubstr("MOFED driver is ready"));
}

TEST(HostSteps, TheMofedWaitEndsAtItsTimeout) {
  Bench b;
  b.settings.gpu_direct_rdma_enabled = true;
  b.settings.mofed_wait_timeout = std::chrono::seconds(30);
  b.host.mellanox = "0000:3b:00.0";
  auto s = wait_for_mofed(b.env);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("MOFED driver not ready after"));
}

TEST(PreInstalledSteps, TheNodeIsLabeledPreInstalled) {
  Bench b;
  ASSERT_TRUE(label_pre_installed(b.env));
  auto n = b.cluster.get(kube::paths::node("n1"));
  ASSERT_TRUE(n);
  EXPECT_EQ((*n)["metadata"]["labels"].value("nvidia.com/gpu.deploy.driver", ""), "pre-installed")
      << n->dump();
  EXPECT_THAT(b.log.text(),
              HasSubstr("info Labeling node n1 with nvidia.com/gpu.deploy.driver=pre-installed"));
}

TEST(PreInstalledSteps, TheWaitToBeRemovedSleepsAndSigtermEndsIt) {
  Bench b;
  b.settings.pre_installed_sleep = std::chrono::seconds(60);
  const TimePoint start = b.clock.now();
  ASSERT_TRUE(await_removal(b.env));
  EXPECT_EQ(b.clock.now() - start, std::chrono::seconds(60));

  const CancelToken sigterm = CancelToken().child();
  sigterm.cancel();
  Bench cancelled(sigterm);
  auto s = await_removal(cancelled.env);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "Received SIGTERM while waiting to be removed from the node");
}

TEST(SkipReport, SaysWhatTheDecisionReadAndWhetherTheDriverIsKept) {
  test::LogCapture log;
  report_skip_decision(SkipDecision{});
  EXPECT_EQ(log.text(), "") << "nothing read (no driver loaded), nothing said";
  SkipDecision no_state{
      .skip = false, .checked = true, .log_line = "no state file", .warning = true, .summary = ""};
  report_skip_decision(no_state);
  EXPECT_THAT(log.text(), HasSubstr("info Checking if the currently loaded NVIDIA driver version"));
  EXPECT_THAT(log.text(), HasSubstr("warning no state file\n"));
  EXPECT_THAT(log.text(), Not(HasSubstr("skipping the uninstallation")));
  SkipDecision kept = no_state;
  kept.skip = true;
  kept.warning = false;
  kept.log_line.clear();
  report_skip_decision(kept);
  EXPECT_THAT(log.text(), HasSubstr("info The NVIDIA driver is already loaded with the desired version and "
                                    "configuration, skipping the uninstallation"));
}

TEST(PodSteps, TheDrainAfterAFailedEvictionDrainsTheNodeByItsSettings) {
  Bench b;
  b.watch_pods();
  ASSERT_TRUE(drain_after_failed_eviction(b.env));
  EXPECT_THAT(b.log.text(), HasSubstr("info Attempting node drain\n"));
  EXPECT_THAT(b.log.text(), HasSubstr("info Node n1 drained"));

  b.settings.drain_pod_selector_label = "app in (a";
  auto s = drain_after_failed_eviction(b.env);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("invalid DRAIN_POD_SELECTOR_LABEL"));
}

TEST(PodSteps, TheClaimGuardNamesAPodStillHoldingAnAllocatedGpuClaim) {
  Bench b;
  b.add_pod("plain");
  b.add_pod("claimer", {{"resourceClaims",
                         nlohmann::json::array({{{"name", "gpu"}, {"resourceClaimName", "claimer-gpu"}}})}});
  b.watch_pods();
  ASSERT_TRUE(check_dra_claims(b.env)) << "its claim does not exist: no GPU held";
  EXPECT_THAT(b.log.text(),
              HasSubstr("info Checking that no pod on the node still holds a GPU resource claim"));

  const nlohmann::json result = {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"device", "gpu-0"}};
  nlohmann::json claim = {{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceClaim"},
                          {"metadata", {{"name", "claimer-gpu"}, {"namespace", "work"}}}};
  claim["status"]["allocation"]["devices"]["results"] = nlohmann::json::array({result});
  b.cluster.apply(claim);
  auto s = check_dra_claims(b.env);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("pod(s) still hold GPU resource claims: work/claimer"));
  EXPECT_THAT(s.error().message, Not(HasSubstr("work/plain")));
}

TEST(PodSteps, TheDraPluginClientResetHasNothingToDoWithoutSuchAClient) {
  Bench b;
  b.add_pod("monitor");
  b.watch_pods();
  EXPECT_FALSE(b.clients.dra_plugin_clients_present());
  ASSERT_TRUE(reset_dra_plugin_clients(b.env));
  EXPECT_TRUE(b.undo.empty()) << "no taint added, nothing to undo";
  auto n = b.cluster.get(kube::paths::node("n1"));
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->contains("spec") && (*n)["spec"].contains("taints")) << n->dump();
}

}  // namespace
}  // namespace dm::manager
