// The uninstall flow's paths and failure branches through the in-memory cluster (tests/support/
// memory_scenario.h): the same scenarios as tests/integration/uninstall_flow_test.cc and
// uninstall_failure_test.cc, in seconds. Kubernetes' own behaviour is not tested here: the contract suite
// (api_contract_test) keeps the in-memory cluster to the real API server's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "support/cluster.h"
#include "support/memory_scenario.h"
#include "support/process.h"

namespace dm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kPrefix = "nvidia.com/gpu.deploy.";

void expect_labels(const MemoryScenario& s, const std::vector<MemOperand>& ops, const std::string& value) {
  for (const auto& op : ops) EXPECT_EQ(s.label(kPrefix + op.label), value) << op.label;
}

TEST(UninstallMemory, FullPathTakesEverythingOffUnloadsAndBringsItBack) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy_operands(ops);
  s.deploy_pod({.name = "trainer", .request_gpu = true});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  write_file(s.sim_path("/run/nvidia/nvidia-driver.pid"), "4242\n");
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-old\n");

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_THAT(r.log, HasSubstr("Waiting for nvidia-dcgm-exporter to shutdown"));
  EXPECT_THAT(r.log, HasSubstr("Cordoning node node-a"));
  EXPECT_THAT(r.log, HasSubstr("evicting pod workloads/trainer"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  EXPECT_EQ(s.requests_with("/namespaces/workloads/pods/trainer/eviction"), 1U);
  EXPECT_FALSE(s.driver_loaded()) << "the unload succeeds only once every holder is gone";
  EXPECT_FALSE(std::filesystem::exists(s.sim_path("/run/nvidia/nvidia-driver.pid")));
  expect_labels(s, ops, "true");
  const auto st = s.state();
  EXPECT_FALSE(st.unschedulable);
  EXPECT_EQ(st.annotations.count("nvidia.com/gpu-driver-manager.cordoned"), 0U);
  EXPECT_EQ(st.annotations.count("nvidia.com/gpu-driver-manager.lease"), 0U);
  EXPECT_EQ(st.annotations.count("nvidia.com/gpu-driver-manager.paused-labels"), 0U);
  s.wait_running(s.operator_ns(), ops.size());  // the operands come back
}

TEST(UninstallMemory, PolicyOnNeverEvictsAndRestoresWhenAWorkloadHoldsTheGpu) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy_operands(ops);
  s.deploy_pod({.name = "trainer", .request_gpu = true});
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  const auto r = s.run(s.settings());

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Could not unload NVIDIA driver kernel modules, driver is in use"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_THAT(r.log,
              HasSubstr("kubectl label node node-a nvidia.com/gpu-driver-upgrade-state=upgrade-required"));
  EXPECT_EQ(s.requests_with("/eviction"), 0U);
  EXPECT_FALSE(s.state().unschedulable);
  EXPECT_TRUE(s.driver_loaded());
  EXPECT_EQ(s.running(s.workload_ns()), 1U) << "the workload is not touched";
  expect_labels(s, ops, "true");
}

TEST(UninstallMemory, SkipPathBouncesOperandsButKeepsTheDriverAndTheWorkloads) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy_operands(ops);
  s.deploy_pod({.name = "trainer", .request_gpu = true});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");
  auto settings = s.settings();
  settings.driver_config_digest = "digest-same";

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log,
              HasSubstr("The NVIDIA driver is already loaded with the desired version and configuration"));
  EXPECT_THAT(r.log, Not(HasSubstr("Cordoning node")));
  EXPECT_EQ(s.requests_with("/eviction"), 0U);
  EXPECT_TRUE(s.driver_loaded());
  EXPECT_EQ(s.running(s.workload_ns()), 1U);
  expect_labels(s, ops, "true");
}

TEST(UninstallMemory, NoDriverPathHealsACrashedRunWithoutEvictingAnything) {
  MemoryScenario s("node-a", /*driver=*/false);
  const auto ops = default_mem_operands();
  s.deploy_operands(ops);
  s.deploy_pod({.name = "trainer", .request_gpu = true});
  s.label_node({{kPrefix + "device-plugin", kMemPausedValue}});
  s.cordon();
  s.annotate_node("nvidia.com/gpu-driver-manager.cordoned", "true");
  s.wait_running(s.operator_ns(), ops.size() - 1);

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("No NVIDIA driver loaded, skipping eviction of GPU clients and workloads"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  EXPECT_EQ(s.requests_with("/eviction"), 0U);
  EXPECT_FALSE(s.state().unschedulable);
  EXPECT_EQ(s.state().annotations.count("nvidia.com/gpu-driver-manager.cordoned"), 0U);
  expect_labels(s, ops, "true");
  EXPECT_EQ(s.running(s.workload_ns()), 1U);
}

TEST(UninstallMemory, PreInstalledHostDriverLabelsTheNodeAndFails) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy_operands(ops);
  s.label_node({{kPrefix + "driver", "true"}});
  const std::string smi = s.sim_path("/host/usr/bin/nvidia-smi");
  std::filesystem::create_directories(std::filesystem::path(smi).parent_path());
  write_file(smi, "#!/bin/sh\necho 550.54.15\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);

  const auto r = s.run(s.settings());

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("driver is pre-installed on host"));
  EXPECT_EQ(s.label(kPrefix + "driver"), "pre-installed");
  expect_labels(s, ops, "true");
  EXPECT_TRUE(s.driver_loaded());
}

TEST(UninstallMemory, PdbBlockedWorkloadFailsAtTheDrainTimeoutAndRestoresTheNode) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy_operands(ops);
  s.deploy_pod({.name = "inference", .request_gpu = true});
  s.block_with_pdb("inference-budget", "inference");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto before = s.state();
  auto settings = s.settings();
  settings.drain_timeout = std::chrono::seconds(2);

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("disruption budget inference-budget"));
  EXPECT_THAT(r.log, HasSubstr("cannot proceed until all GPU pods are drained from the node"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  EXPECT_EQ(s.state(), before);
  EXPECT_EQ(s.running(s.workload_ns()), 1U);
  EXPECT_TRUE(s.driver_loaded());
  bool recorded = false;
  for (const auto& e : s.cluster().objects("/api/v1/namespaces/default/events")) {
    recorded =
        recorded || (e.value("reason", "") == "DriverUninstallFailed" && e.value("type", "") == "Warning" &&
                     e.value("message", "").find("inference-budget") != std::string::npos);
  }
  EXPECT_TRUE(recorded);
}

TEST(UninstallMemory, AnAdminsCordonSurvivesASuccessfulRun) {
  MemoryScenario s;
  s.deploy_operands(default_mem_operands());
  s.deploy_pod({.name = "trainer", .request_gpu = true});
  s.wait_running(s.operator_ns(), default_mem_operands().size());
  s.cordon();

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Node node-a is already cordoned by someone else; it will stay cordoned"));
  EXPECT_THAT(r.log, Not(HasSubstr("Uncordoning node")));
  EXPECT_TRUE(s.state().unschedulable);
  EXPECT_FALSE(s.driver_loaded());
}

TEST(UninstallMemory, DrainFallbackEvictsAHolderTheWorkloadEvictionCannotSee) {
  MemoryScenario s;
  s.deploy_operands(default_mem_operands());
  s.deploy_pod({.name = "agent", .holds_gpu = true, .labels = {{"drain", "yes"}}});
  s.deploy_pod({.name = "bystander"});
  s.wait_running(s.operator_ns(), default_mem_operands().size());
  s.wait_running(s.workload_ns(), 2);
  auto settings = s.settings();
  settings.enable_gpu_pod_eviction = false;
  settings.enable_auto_drain = true;
  settings.drain_pod_selector_label = "drain=yes";

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Unable to cleanup driver modules, attempting again with node drain..."));
  EXPECT_EQ(s.requests_with("/pods/agent/eviction"), 1U);
  EXPECT_EQ(s.requests_with("/pods/bystander/eviction"), 0U);
  EXPECT_FALSE(s.driver_loaded());
  EXPECT_FALSE(s.state().unschedulable);
}

// A failure at each step that changed the node: the run fails (exit 1) and the node is as before it.
struct FailureCase {
  std::string name;
  Fault fault;
  bool stuck_operand = false;  // an operand pod that never finishes terminating
  bool hidden_holder = false;  // a pod holds the GPU without requesting it (the unload is refused)
  std::string expected;        // in the log
};

class UninstallMemoryFailure : public ::testing::TestWithParam<FailureCase> {};

TEST_P(UninstallMemoryFailure, RestoresLabelsTaintAndCordon) {
  const auto& c = GetParam();
  MemoryScenario s;
  auto ops = default_mem_operands();
  if (c.stuck_operand) ops.push_back({"dcgm", "nvidia-dcgm", false, true});
  s.deploy_operands(ops);
  s.deploy_pod({.name = "agent", .gpu_client = "true"});
  s.deploy_pod({.name = "trainer", .request_gpu = true});
  if (c.hidden_holder) s.deploy_pod({.name = "hidden", .holds_gpu = true});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), c.hidden_holder ? 3 : 2);
  const auto before = s.state();
  auto settings = s.settings();
  settings.operand_wait_timeout = std::chrono::seconds(c.stuck_operand ? 1 : 20);
  if (!c.fault.verb.empty()) s.cluster().fail(c.fault);

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr(c.expected));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_EQ(s.state(), before) << r.log;
  EXPECT_TRUE(s.driver_loaded());
}

INSTANTIATE_TEST_SUITE_P(
    EachStep, UninstallMemoryFailure,
    ::testing::Values(
        // 403: a refusal no retry fixes (a 5xx is retried, and then the step goes through).
        FailureCase{"PausePatch",
                    {.verb = "patch", .body_part = kMemPausedValue, .status = 403},
                    false,
                    false,
                    "injected fault"},
        FailureCase{"Cordon",
                    {.verb = "patch", .body_part = "\"unschedulable\":true", .status = 500},
                    false,
                    false,
                    "injected fault"},
        // The cordon went through but its answer was lost: it is undone all the same.
        FailureCase{"CordonTimedOutAfterTakingEffect",
                    {.verb = "patch", .body_part = "\"unschedulable\":true", .status = 0, .applied = true},
                    false,
                    false,
                    "timed out"},
        FailureCase{"Taint",
                    {.verb = "patch", .body_part = "\"taints\"", .status = 500},
                    false,
                    false,
                    "injected fault"},
        FailureCase{"WorkloadEviction",
                    {.verb = "evict", .path_part = "trainer", .status = 403, .times = -1},
                    false,
                    false,
                    "injected fault"},
        FailureCase{"ClientEviction",
                    {.verb = "evict", .path_part = "agent", .status = 403, .times = -1},
                    false,
                    false,
                    "injected fault"},
        FailureCase{"OperandWaitTimeout", {}, true, false, "timed out"},
        FailureCase{"UnloadRefused", {}, false, true, "failed to unload NVIDIA driver kernel modules"}),
    [](const ::testing::TestParamInfo<FailureCase>& param_info) { return param_info.param.name; });

TEST(UninstallMemory, SigtermDuringTheOperandWaitRestoresTheNodeAndExits143) {
  MemoryScenario s;
  auto ops = default_mem_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  s.deploy_operands(ops);
  s.deploy_pod({.name = "agent", .gpu_client = "true", .stuck = true});
  s.deploy_pod({.name = "trainer", .request_gpu = true, .stuck = true});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  const auto before = s.state();
  CancelToken sigterm;
  std::thread killer([&] {
    // Once all three sides have changed the node: the labels paused, the taint and the cordon on.
    eventually([&] {
      const auto st = s.state();
      return st.unschedulable && st.annotations.count("nvidia.com/gpu-driver-manager.tainted") > 0 &&
             s.label(kPrefix + "dcgm") == kMemPausedValue;
    });
    sigterm.cancel();
  });
  auto settings = s.settings();
  settings.operand_wait_timeout = std::chrono::seconds(60);

  const auto r = s.run(settings, sigterm);
  killer.join();

  EXPECT_EQ(r.exit_code, 143) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Received SIGTERM: restoring the node before exiting"));
  EXPECT_EQ(s.state(), before) << r.log;
  EXPECT_TRUE(s.driver_loaded());
}

}  // namespace
}  // namespace dm::test
