// The steps that are functions over the run's environment (manager/commands/env_steps.h), each run alone
// on a test::Bench (support/step_bench.h).
#include "manager/commands/env_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kube/api.h"
#include "support/step_bench.h"

namespace dm::manager {
namespace {

using test::Bench;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

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
