// The uninstall flow's paths and failure branches through the in-memory cluster (tests/support/
// memory_scenario.h): the same scenarios as tests/integration/uninstall_flow_test.cc and
// uninstall_failure_test.cc, in seconds. Kubernetes' own behaviour is not tested here: the contract suite
// (api_contract_test) keeps the in-memory cluster to the real API server's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/cluster.h"
#include "support/memory_scenario.h"
#include "support/process.h"

namespace dm::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const std::string kPrefix = "nvidia.com/gpu.deploy.";

void expect_labels(const MemoryScenario& s, const std::vector<MemOperand>& ops, const std::string& value) {
  for (const auto& op : ops) EXPECT_EQ(s.label(kPrefix + op.label), value) << op.label;
}

// Settings whose driver configuration is the one the loaded driver was installed with (its state file).
manager::Settings with_matching_digest(const MemoryScenario& s) {
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");
  auto settings = s.settings();
  settings.driver_config_digest = "digest-same";
  return settings;
}

TEST(UninstallMemory, FullPathTakesEverythingOffUnloadsAndBringsItBack) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy({.operands = ops, .pods = {{.name = "trainer", .request_gpu = true}}});
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

// Upstream's driver manager writes an operand label that was absent as "": a node it upgraded keeps such
// labels, which deploy nothing and keep the operator from setting the key. The restore removes them, on
// success and after a failure alike; a label someone gave a value during the run is theirs.
TEST(UninstallMemory, TheRestoreRemovesEmptyOperandLabelsAnEarlierManagerLeft) {
  for (const bool fail : {false, true}) {
    SCOPED_TRACE(fail ? "failed run" : "successful run");
    MemoryScenario s;
    const auto ops = default_mem_operands();
    s.deploy({.operands = ops, .pods = {{.name = "trainer", .request_gpu = true}}});
    s.label_node({{kPrefix + "nvsm", ""}, {kPrefix + "dra-validator", ""}, {"example.com/other", ""}});
    // A held GPU under the upgrade policy: the unload fails and the node is restored.
    if (fail) s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");

    const auto r = s.run(s.settings());

    EXPECT_EQ(r.exit_code, fail ? 1 : 0) << r.log;
    EXPECT_EQ(s.label(kPrefix + "nvsm"), "<absent>");
    EXPECT_EQ(s.label(kPrefix + "dra-validator"), "<absent>");
    EXPECT_EQ(s.label("example.com/other"), "") << "only operand labels";
    EXPECT_THAT(r.log, HasSubstr("Removing the empty node label \"nvidia.com/gpu.deploy.nvsm\""));
    expect_labels(s, ops, "true");
  }
}

TEST(UninstallMemory, PolicyOnNeverEvictsAndRestoresWhenAWorkloadHoldsTheGpu) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy({.operands = ops, .pods = {{.name = "trainer", .request_gpu = true}}});
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");

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
  s.deploy({.operands = ops, .pods = {{.name = "trainer", .request_gpu = true}}});
  auto settings = with_matching_digest(s);

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

// SIGTERM while the pre-installed path waits to be removed: exit 143, the label stays (it is what removes
// us).
TEST(UninstallMemory, SigtermWhileThePreInstalledPathWaitsExits143) {
  MemoryScenario s;
  s.deploy_operands(default_mem_operands());
  s.label_node({{kPrefix + "driver", "true"}});
  const std::string smi = s.sim_path("/host/usr/bin/nvidia-smi");
  std::filesystem::create_directories(std::filesystem::path(smi).parent_path());
  write_file(smi, "#!/bin/sh\necho 550.54.15\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);
  CancelToken sigterm;
  std::thread killer([&] {
    // However long a loaded machine takes to get there (a SIGTERM sent earlier would test another moment).
    eventually([&] { return s.label(kPrefix + "driver") == "pre-installed"; }, kPatientSeconds);
    sigterm.cancel();
  });
  auto settings = s.settings();
  settings.pre_installed_sleep = std::chrono::minutes(10);

  const auto r = s.run(settings, sigterm);
  killer.join();

  EXPECT_EQ(r.exit_code, 143) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Received SIGTERM while waiting to be removed from the node"));
  EXPECT_THAT(r.log, Not(HasSubstr("driver is pre-installed on host")));
  EXPECT_EQ(s.label(kPrefix + "driver"), "pre-installed");
}

TEST(UninstallMemory, PdbBlockedWorkloadFailsAtTheDrainTimeoutAndRestoresTheNode) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "inference", .request_gpu = true}}});
  s.block_with_pdb("inference-budget", "inference");
  const auto before = s.state();
  auto settings = s.settings();
  settings.drain_timeout = std::chrono::seconds(1);

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
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true}}});
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
  s.deploy(
      {.pods = {{.name = "agent", .holds_gpu = true, .labels = {{"drain", "yes"}}}, {.name = "bystander"}}});
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

TEST(UninstallMemory, ForceReinstallUninstallsEvenWhenTheDigestMatches) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true}}});
  auto settings = with_matching_digest(s);
  settings.force_reinstall = true;

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Force reinstall is enabled, proceeding with driver uninstall"));
  EXPECT_THAT(r.log, Not(HasSubstr("already loaded with the desired version and configuration")));
  EXPECT_THAT(s.evicted(), ElementsAre("workloads/trainer"));
  EXPECT_FALSE(s.driver_loaded());
  EXPECT_FALSE(s.state().unschedulable);
  expect_labels(s, default_mem_operands(), "true");
}

// DaemonSets selecting nvidia.com/gpu.deploy.client, or the custom key, go with their paused labels and are
// waited for like operands: never evicted (also when annotated a GPU client), no taint for them.
TEST(UninstallMemory, ClientLabelAndCustomLabelDaemonSetsGoByTheirLabelsAndAreNotEvicted) {
  MemoryScenario s;
  s.deploy({.daemonsets = {{.name = "client-agent",
                            .node_selector = {{kPrefix + "client", "true"}},
                            .holds_gpu = true,
                            .gpu_client = "true"},
                           {.name = "custom-agent",
                            .node_selector = {{"example.com/gpu-agent", "true"}},
                            .holds_gpu = true}}});
  auto settings = s.settings();
  settings.node_label_for_gpu_pod_eviction = "example.com/gpu-agent";

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Shutting down GPU clients using node selector label "
                               "\"example.com/gpu-agent\"=true"));
  EXPECT_THAT(r.log, HasSubstr("Waiting for any daemon set pods with nodeSelector key " + kPrefix +
                               "client to terminate"));
  EXPECT_THAT(r.log, HasSubstr("Waiting for any daemon set pods with nodeSelector key example.com/gpu-agent "
                               "to terminate"));
  EXPECT_THAT(r.log, HasSubstr("skip [node-label]"));
  EXPECT_THAT(s.evicted(), IsEmpty());
  EXPECT_EQ(s.requests_with("taints"), 0U);
  EXPECT_FALSE(s.driver_loaded()) << "both held the GPU: the unload succeeds only once they are gone";
  EXPECT_EQ(s.label(kPrefix + "client"), "true");
  EXPECT_EQ(s.label("example.com/gpu-agent"), "true");
  EXPECT_TRUE(s.state().taints.empty());
  s.wait_running(s.workload_ns(), 2);  // their DaemonSets bring them back
}

// NVSentinel's shape: a DaemonSet that selects the node through its required node affinity, "client In
// [true]" or "client DoesNotExist". The paused label matches neither term, so its controller takes the pod
// off and the run waits for it like a nodeSelector one: never evicted, no taint, named with the rule.
TEST(UninstallMemory, DaemonSetSelectingTheClientLabelByNodeAffinityIsWaitedFor) {
  MemoryScenario s;
  s.deploy({.daemonsets = {{.name = "health-agent",
                            .node_selector = {},
                            .holds_gpu = true,
                            .gpu_client = "true",
                            .affinity_terms = nlohmann::json::parse(R"([
                              {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client", "operator": "In",
                                                     "values": ["true"]}]},
                              {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client",
                                                     "operator": "DoesNotExist"}]}])"),
                            .node_labels = {{kPrefix + "client", "true"}}}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Waiting for 1 daemon set pod(s) with nodeSelector key \"" + kPrefix +
                               "client\" to terminate"));
  EXPECT_THAT(r.log,
              ::testing::ContainsRegex("Waiting for daemon set pod workloads/health-agent-[a-z0-9]+ to "
                                       "terminate: its node affinity on " +
                                       kPrefix + "client no longer matches"));
  EXPECT_THAT(r.log, HasSubstr("through its node affinity: removed and waited for through that label"));
  EXPECT_THAT(s.evicted(), IsEmpty());
  EXPECT_EQ(s.requests_with("taints"), 0U);
  EXPECT_FALSE(s.driver_loaded()) << "it held the GPU: the unload succeeds only once it is gone";
  EXPECT_EQ(s.label(kPrefix + "client"), "true");
  s.wait_running(s.workload_ns(), 1);  // its DaemonSet brings it back
}

// GPU users without a GPU request are GPU workloads: a notebook on the NVIDIA runtime class, a pod with
// NVIDIA_VISIBLE_DEVICES=all, a pod naming NVIDIA CDI devices. Each holds the GPU, so the unload succeeds
// only once they are evicted; each eviction's line says why it counts. A pod naming a RuntimeClass that does
// not exist is said so and not counted through it; "void" devices and a runc class are no GPU use.
TEST(UninstallMemory, GpuUsersWithoutAGpuRequestAreEvicted) {
  MemoryScenario s;
  s.add_runtime_class("nvidia", "nvidia");
  s.add_runtime_class("runc", "runc");
  s.deploy(
      {.pods = {
           {.name = "notebook", .holds_gpu = true, .runtime_class = "nvidia"},
           {.name = "all-devices", .holds_gpu = true, .env = {{"NVIDIA_VISIBLE_DEVICES", "all"}}},
           {.name = "cdi", .holds_gpu = true, .annotations = {{"cdi.k8s.io/main", "nvidia.com/gpu=all"}}},
           {.name = "no-devices", .env = {{"NVIDIA_VISIBLE_DEVICES", "void"}}},
           {.name = "plain", .runtime_class = "runc"},
           {.name = "lost-class", .runtime_class = "gone"}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(s.evicted(), ::testing::UnorderedElementsAre("workloads/notebook", "workloads/all-devices",
                                                           "workloads/cdi"));
  EXPECT_THAT(r.log,
              HasSubstr("workloads/notebook: evict: GPU pod without a GPU request: RuntimeClass \"nvidia\" "
                        "runs it on the NVIDIA container runtime (handler \"nvidia\")"));
  EXPECT_THAT(r.log, HasSubstr("workloads/all-devices: evict: GPU pod without a GPU request: "
                               "NVIDIA_VISIBLE_DEVICES=all in a container"));
  EXPECT_THAT(r.log, HasSubstr("workloads/cdi: evict: GPU pod without a GPU request: CDI annotation "
                               "cdi.k8s.io/main=nvidia.com/gpu=all"));
  EXPECT_THAT(r.log, HasSubstr("GPU pod - workloads/notebook"));
  EXPECT_THAT(r.log,
              HasSubstr("RuntimeClass \"gone\" does not exist: pods naming it are not counted as GPU pods "
                        "through it"));
  EXPECT_THAT(r.log,
              HasSubstr("workloads/lost-class: skip [gpu]: does not use a GPU; its RuntimeClass \"gone\" "
                        "does not exist"));
  EXPECT_FALSE(s.driver_loaded());
  EXPECT_FALSE(s.state().unschedulable) << "uncordoned at the end";
}

// The GPU Operator's stock role may not read RuntimeClasses: a pod on a class named as the NVIDIA Container
// Toolkit names its classes still counts (by that name, said once), so the unload does not meet it; a
// class of another name is said once and not counted.
TEST(UninstallMemory, AnUnreadableNvidiaRuntimeClassCountsByItsName) {
  MemoryScenario s;
  s.add_runtime_class("nvidia", "nvidia");
  s.add_runtime_class("custom", "runc");
  s.cluster().fail({.verb = "get", .path_part = "runtimeclasses", .status = 403, .times = -1});
  s.deploy({.pods = {{.name = "notebook", .holds_gpu = true, .runtime_class = "nvidia"},
                     {.name = "other", .runtime_class = "custom"}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(s.evicted(), ::testing::ElementsAre("workloads/notebook"));
  EXPECT_THAT(r.log, HasSubstr("Cannot read RuntimeClass \"nvidia\""));
  EXPECT_THAT(r.log, HasSubstr("pods naming it are counted as GPU pods by its name, the name the NVIDIA "
                               "Container Toolkit gives its class"));
  EXPECT_THAT(r.log, HasSubstr("workloads/notebook: evict: GPU pod without a GPU request: RuntimeClass "
                               "\"nvidia\" may not be read; its name is one the NVIDIA Container Toolkit "
                               "gives its classes"));
  EXPECT_THAT(r.log, HasSubstr("workloads/other: skip [gpu]: does not use a GPU; its RuntimeClass \"custom\" "
                               "may not be read"));
  EXPECT_FALSE(s.driver_loaded()) << "the notebook held the GPU: the unload succeeds only once it is gone";
}

// The driver pod this run is in, standing on no node (nothing runs it), tolerating only `toleration_key`.
void add_own_pod(MemoryScenario& s, manager::Settings& settings, const std::string& toleration_key) {
  s.cluster().apply(
      {{"apiVersion", "v1"},
       {"kind", "Pod"},
       {"metadata", {{"name", "driver-pod"}, {"namespace", s.operator_ns()}}},
       {"spec",
        {{"nodeName", "no-such-node"},
         {"tolerations", nlohmann::json::array({{{"key", toleration_key}, {"operator", "Exists"}}})},
         {"containers", nlohmann::json::array({{{"name", "k8s-driver-manager"}, {"image", "x"}}})}}}});
  settings.pod_name = "driver-pod";
  settings.pod_namespace = s.operator_ns();
}

// The own pod must tolerate the GPU client taint only when this run adds it: with no client to reset, a
// driver pod that does not tolerate the configured taint runs (as upstream, which has no such guard).
TEST(UninstallMemory, OwnPodNotToleratingTheTaintRunsWhenNoTaintIsAdded) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true}}});
  auto settings = s.settings();
  settings.gpu_client_taint = "example.com/gpu-maintenance=driver:NoSchedule";
  add_own_pod(s, settings, "nvidia.com/gpu");

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log,
              HasSubstr("does not tolerate the GPU client taint example.com/gpu-maintenance=driver:"
                        "NoSchedule; going on, as this run adds no taint: no GPU client pod to reset"));
  EXPECT_THAT(s.evicted(), ElementsAre("workloads/trainer"));
  EXPECT_EQ(s.requests_with("taints"), 0U);
  EXPECT_FALSE(s.driver_loaded());
}

// With a client to reset the run would taint the node: the same pod is refused before any write.
TEST(UninstallMemory, OwnPodNotToleratingTheTaintIsRefusedWhenATaintWouldBeAdded) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "agent", .gpu_client = "true"}}});
  auto settings = s.settings();
  settings.gpu_client_taint = "example.com/gpu-maintenance=driver:NoSchedule";
  add_own_pod(s, settings, "nvidia.com/gpu");

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("refusing to start: this pod (" + s.operator_ns() +
                               "/driver-pod) does not tolerate the GPU client taint"));
  EXPECT_EQ(s.requests_with("PATCH"), 0U) << "nothing written";
  EXPECT_THAT(s.evicted(), IsEmpty());
  EXPECT_TRUE(s.driver_loaded());
  expect_labels(s, default_mem_operands(), "true");
}

// NVSentinel's shape again, tolerating every taint, beside a driver pod that does not tolerate the configured
// taint. Its pod carries only the DaemonSet controller's match on the node's name; its DaemonSet's template
// selects the client label, so the label pause keeps it off. The checks before the first write judge it by
// that template as the pause does: no taint is needed (the run goes on) and nothing is named as kept off by
// nothing.
TEST(UninstallMemory, ChecksBeforeTheFirstWriteJudgeDaemonSetPodsByTheirTemplates) {
  MemoryScenario s;
  s.deploy({.daemonsets = {{.name = "health-agent",
                            .node_selector = {},
                            .holds_gpu = true,
                            .gpu_client = "true",
                            .affinity_terms = nlohmann::json::parse(R"([
                              {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client", "operator": "In",
                                                     "values": ["true"]}]}])"),
                            .node_labels = {{kPrefix + "client", "true"}},
                            .tolerations = nlohmann::json::array({{{"operator", "Exists"}}})}}});
  auto settings = s.settings();
  settings.gpu_client_taint = "example.com/gpu-maintenance=driver:NoSchedule";
  add_own_pod(s, settings, "nvidia.com/gpu");

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log,
              HasSubstr("does not tolerate the GPU client taint example.com/gpu-maintenance=driver:"
                        "NoSchedule; going on, as this run adds no taint: no GPU client pod to reset"));
  EXPECT_THAT(r.log, Not(HasSubstr("Nothing keeps these GPU clients off")));
  EXPECT_THAT(r.log, HasSubstr("through its node affinity: removed and waited for through that label"));
  EXPECT_THAT(s.evicted(), IsEmpty());
  EXPECT_EQ(s.requests_with("taints"), 0U);
  EXPECT_FALSE(s.driver_loaded()) << "it held the GPU: the unload succeeds only once it is gone";
  s.wait_running(s.workload_ns(), 1);  // its DaemonSet brings it back
}

// Under driver.hostNetwork HOSTNAME is the node's name and names no pod, and no POD_NAME is set: the pod is
// found by the UID its own cgroup names (the simulated host's /proc/self/cgroup, as the kubelet's systemd
// cgroup driver writes it) among the node's pods, and its toleration is checked before any write.
TEST(UninstallMemory, OwnPodIsFoundByItsCgroupWhenHostnameNamesNoPod) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "agent", .gpu_client = "true"}}});
  const auto own = s.cluster().apply(
      {{"apiVersion", "v1"},
       {"kind", "Pod"},
       {"metadata", {{"name", "nvidia-driver-daemonset-x1"}, {"namespace", s.operator_ns()}}},
       {"spec",
        {{"nodeName", s.node()},
         {"hostNetwork", true},
         {"tolerations", nlohmann::json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}})},
         {"containers", nlohmann::json::array({{{"name", "k8s-driver-manager"}, {"image", "x"}}})}}}});
  std::string uid = own["metadata"]["uid"];
  std::replace(uid.begin(), uid.end(), '-', '_');
  std::filesystem::create_directories(s.sim_path("/proc/self"));
  std::ofstream(s.sim_path("/proc/self/cgroup"))
      << "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" << uid
      << ".slice/cri-containerd-0123abcd.scope\n";
  auto settings = s.settings();
  settings.pod_name.clear();
  settings.hostname = s.node();
  settings.gpu_client_taint = "example.com/gpu-maintenance=driver:NoSchedule";

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(
      r.log, HasSubstr("Own pod " + s.operator_ns() + "/nvidia-driver-daemonset-x1 found by the pod UID " +
                       std::string(own["metadata"]["uid"]) + " of this program's cgroup (" + s.operator_ns() +
                       "/node-a from HOSTNAME in OPERATOR_NAMESPACE names no pod)"));
  EXPECT_THAT(r.log, HasSubstr("refusing to start: this pod (" + s.operator_ns() +
                               "/nvidia-driver-daemonset-x1) does not tolerate the GPU client taint"));
  EXPECT_EQ(s.requests_with("PATCH"), 0U) << "nothing written";
  EXPECT_TRUE(s.driver_loaded());
}

// docs/gpu-clients.md: a DRA-plugin client goes after the GPU workloads, the other clients and the claim
// guard; the operator's own DRA plugin goes after it, right before the unload.
TEST(UninstallMemory, DraPluginClientGoesAfterTheWorkloadsAndTheOtherClientsThenThePlugin) {
  MemoryScenario s;
  auto ops = default_mem_operands();
  ops.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", true, false});
  s.deploy({.operands = ops,
            .pods = {{.name = "dra-plugin", .gpu_client = "true", .dra_plugin = true, .holds_gpu = true},
                     {.name = "monitor", .gpu_client = "true"},
                     {.name = "trainer", .request_gpu = true}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto evicted = s.evicted();
  ASSERT_THAT(evicted,
              UnorderedElementsAre("workloads/monitor", "workloads/trainer", "workloads/dra-plugin"));
  EXPECT_EQ(evicted.back(), "workloads/dra-plugin");
  EXPECT_THAT(r.log, HasSubstr("DRA plugin client: reset after the GPU workloads"));
  const std::vector<std::string> in_order = {
      "evicting pod workloads/trainer",
      "Checking that no pod on the node still holds a GPU resource claim",
      "evicting pod workloads/dra-plugin",
      "Draining the DRA kubelet-plugin (last, after its claim-holding clients)",
      "Waiting for dra-driver to shutdown",
      "Unloading NVIDIA driver kernel modules",
  };
  size_t at = 0;
  for (const auto& line : in_order) {
    const size_t found = r.log.find(line, at);
    ASSERT_NE(found, std::string::npos) << "\"" << line << "\" missing or out of order:\n" << r.log;
    at = found;
  }
  EXPECT_FALSE(s.driver_loaded());
  expect_labels(s, ops, "true");
  EXPECT_TRUE(s.state().taints.empty());
}

TEST(UninstallMemory, UncordonAlwaysClearsEvenAnAdminsCordon) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true}}});
  s.cordon();
  auto settings = s.settings();
  settings.legacy_uncordon = true;

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  EXPECT_FALSE(s.state().unschedulable);
  EXPECT_EQ(s.state().annotations.count("nvidia.com/gpu-driver-manager.cordoned"), 0U);
  EXPECT_FALSE(s.driver_loaded());
}

TEST(UninstallMemory, UncordonAlwaysUncordonsAnAdminsCordonAlsoWhenTheRunFails) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true}}});
  s.cordon();
  auto before = s.state();
  auto settings = s.settings();
  settings.legacy_uncordon = true;
  s.cluster().fail({.verb = "evict", .path_part = "trainer", .status = 403, .times = -1});

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  before.unschedulable = false;  // upstream's rule: whoever cordoned it
  EXPECT_EQ(s.state(), before) << r.log;
  EXPECT_TRUE(s.driver_loaded());
}

// A pod that holds an allocated claim of the GPU DRA driver holds the GPU (node-sim's kubelet prepared the
// claim for it) and is a GPU pod to driver-manager: evicted as a GPU workload, and the unload finds the GPU
// free.
TEST(UninstallMemory, AGpuClaimHolderIsEvictedAsAGpuWorkloadBeforeTheUnload) {
  MemoryScenario s;
  s.add_gpu_claim("claimer-gpu");
  s.deploy({.pods = {{.name = "claimer", .gpu_claim = "claimer-gpu"}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("GPU pod - workloads/claimer"));
  EXPECT_THAT(s.evicted(), ElementsAre("workloads/claimer"));
  EXPECT_FALSE(s.driver_loaded());
}

// The same pod when this run evicts no workloads, on a node whose DRA driver the operator did not deploy: the
// allocated claim is enough for DRA to count as in use, so the claim guard stops the run before the unload
// (the plugin cannot go while a pod's claim needs it), names the pod, and the node is restored.
TEST(UninstallMemory, AGpuClaimHolderTheRunDoesNotEvictStopsTheRunAtTheClaimGuard) {
  MemoryScenario s;
  s.add_gpu_claim("claimer-gpu");
  s.deploy({.pods = {{.name = "claimer", .gpu_claim = "claimer-gpu"}}});
  const auto before = s.state();
  auto settings = s.settings();
  settings.enable_gpu_pod_eviction = false;

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("DRA is in use on node node-a: pods hold allocated GPU claims here "
                               "(workloads/claimer)"));
  EXPECT_THAT(r.log, HasSubstr("pod(s) still hold GPU resource claims: workloads/claimer"));
  EXPECT_THAT(r.log, Not(HasSubstr("Cleaning up NVIDIA driver"))) << "no unload was tried";
  EXPECT_THAT(s.evicted(), IsEmpty());
  EXPECT_TRUE(s.driver_loaded());
  EXPECT_EQ(s.state(), before) << r.log;
}

// The DRA driver installed from its own chart (not by the operator): its kubelet plugin, a DaemonSet in a
// namespace of its own with the chart's labels, holds the GPU. DRA counts as in use (its ResourceSlice and
// the plugin itself); the claim holder is evicted first, the claim guard runs, and the plugin goes last,
// under the taint, without an annotation; the unload succeeds and the plugin is back at the end.
TEST(UninstallMemory, TheDraDriversOwnChartIsResetWithThePluginLast) {
  MemoryScenario s;
  s.add_gpu_claim("claimer-gpu");
  s.cluster().apply(
      {{"apiVersion", "resource.k8s.io/v1"},
       {"kind", "ResourceSlice"},
       {"metadata", {{"name", "node-a-gpu.nvidia.com-x"}}},
       {"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", "node-a"}, {"pool", {{"name", "node-a"}}}}}});
  s.deploy({.pods = {{.name = "claimer", .gpu_claim = "claimer-gpu"}},
            .daemonsets = {{.name = "dra-driver-nvidia-gpu-kubelet-plugin",
                            .ns = "dra-driver",
                            .node_selector = {{"nvidia.com/gpu.present", "true"}},
                            .holds_gpu = true,
                            .pod_labels = {{"app.kubernetes.io/name", "dra-driver-nvidia-gpu"},
                                           {"app.kubernetes.io/instance", "dra"},
                                           {"dra-driver-nvidia-gpu-component", "kubelet-plugin"}}}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("DRA is in use on node node-a: the node has 1 gpu.nvidia.com ResourceSlice"));
  EXPECT_THAT(
      r.log,
      HasSubstr("the NVIDIA DRA kubelet plugin of the DRA driver's chart "
                "(dra-driver-nvidia-gpu-component=kubelet-plugin), a DRA plugin client by what it is"));
  const auto evicted = s.evicted();
  ASSERT_EQ(evicted.size(), 2U) << r.log;
  EXPECT_EQ(evicted[0], "workloads/claimer");
  EXPECT_THAT(evicted[1], ::testing::StartsWith("dra-driver/dra-driver-nvidia-gpu-kubelet-plugin"));
  const auto guard = r.log.find("Checking that no pod on the node still holds a GPU resource claim");
  ASSERT_NE(guard, std::string::npos) << r.log;
  EXPECT_LT(guard, r.log.find("a DRA plugin client by what it is"))
      << "the guard runs before the plugin goes";
  EXPECT_FALSE(s.driver_loaded());
  EXPECT_TRUE(s.state().taints.empty()) << "the taint is removed at the end";
  s.wait_running("dra-driver", 1);  // its DaemonSet brings it back
}

// Binds `late` to the node once the flow has asked to evict `first` (so after the first eviction chose its
// pods, and while `first` is still terminating): a pod bound after the cordon, which only the fresh look
// before the unload can find.
std::thread arrive_after_eviction_of(MemoryScenario& s, const std::string& first, MemPod late) {
  return std::thread([&s, first, late = std::move(late)] {
    if (eventually([&] { return s.requests_with("/pods/" + first + "/eviction") > 0; }, 30,
                   std::chrono::milliseconds(2))) {
      s.deploy_pod(late);
    }
  });
}

TEST(UninstallMemory, AGpuWorkloadBoundAfterTheCordonIsEvictedAsALateArrivalBeforeTheUnload) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true, .terminate_after = "0.5"}}});
  auto late = arrive_after_eviction_of(s, "trainer", {.name = "latecomer", .request_gpu = true});

  const auto r = s.run(s.settings());
  late.join();

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("1 GPU pod(s) arrived late on node node-a: workloads/latecomer"));
  EXPECT_THAT(r.log, HasSubstr("Looking again for GPU pods on node node-a in 1s"));
  EXPECT_THAT(r.log, HasSubstr("No more GPU pods arrived late on node node-a"));
  EXPECT_THAT(s.evicted(), ElementsAre("workloads/trainer", "workloads/latecomer"));
  EXPECT_FALSE(s.driver_loaded()) << "the latecomer held the GPU until it was evicted";
  EXPECT_FALSE(s.state().unschedulable);
}

// A late arrival the filters refuse (no controller: eviction would delete it for good) fails the run like
// the first eviction would, and the node is restored.
TEST(UninstallMemory, ALateArrivalWithoutAControllerFailsTheRunAndTheNodeIsRestored) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true, .terminate_after = "0.5"}}});
  const auto before = s.state();
  auto late = arrive_after_eviction_of(s, "trainer", {.name = "bare", .request_gpu = true, .owner_kind = ""});

  const auto r = s.run(s.settings());
  late.join();

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("arrived on node node-a after it was cordoned and tainted and cannot be "
                               "evicted: workloads/bare"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_EQ(s.requests_with("/pods/bare/eviction"), 0U);
  EXPECT_EQ(s.state(), before) << r.log;
  EXPECT_TRUE(s.driver_loaded());
}

// A failure at each step that changed the node: the run fails (exit 1) and the node is as before it.
// A managed pool's own taint (same key and effect as GPU_CLIENT_TAINT, never changed) and an annotated
// DaemonSet client that tolerates it and selects no client label: nothing keeps it off once evicted. It is
// named before the first write with the fix; its DaemonSet brings it back at once, so the run fails before
// the unload, and the node is restored with the pool's taint as it was.
TEST(UninstallMemory, AClientNothingKeepsOffIsNamedBeforeTheFirstWrite) {
  MemoryScenario s;
  s.deploy({.daemonsets = {{.name = "health-agent",
                            .node_selector = {{"example.com/gpu-node", "true"}},
                            .holds_gpu = true,
                            .gpu_client = "true",
                            .tolerations = nlohmann::json::array({{{"operator", "Exists"}}})}}});
  // The pool's taint (the operands ran before it; NoSchedule leaves running pods alone).
  auto node = s.node_json();
  node["spec"]["taints"] =
      nlohmann::json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}});
  s.cluster().apply(node);
  const auto before = s.state();

  const auto r = s.run(s.settings());

  EXPECT_EQ(r.exit_code, 1) << r.log;
  const auto named = r.log.find(
      "Nothing keeps these GPU clients off node node-a once they are evicted: "
      "workloads/health-agent");
  ASSERT_NE(named, std::string::npos) << r.log;
  EXPECT_THAT(r.log, HasSubstr("(DaemonSet health-agent, tolerates nvidia.com/gpu=present:NoSchedule)"));
  EXPECT_LT(named, r.log.find("Auto upgrade policy of the GPU driver"))
      << "named before the operands are paused";
  // It comes back at once: the look for late arrivals meets it again and again, or the host's look finds it.
  EXPECT_THAT(r.log,
              ::testing::ContainsRegex("GPU pods keep arriving on node node-a|pods found holding the GPU "
                                       "on the host of node node-a cannot be evicted"));
  EXPECT_EQ(s.state(), before) << "the pool's taint is never changed";
  EXPECT_TRUE(s.driver_loaded());
}

// A process of the host (outside any pod, cgroup of a systemd service) with /dev/nvidia0 open, as the
// holder scan reads it in the simulated host.
void add_host_process(MemoryScenario& s, int pid, const std::string& comm) {
  const std::string dir = s.sim_path("/proc/" + std::to_string(pid));
  std::filesystem::create_directories(dir + "/fd");
  std::ofstream(dir + "/comm") << comm << "\n";
  std::ofstream(dir + "/cgroup") << "0::/system.slice/" << comm << ".service\n";
  std::filesystem::create_symlink(s.sim_path("/dev/nvidia0"), dir + "/fd/3");
}

// The host's evidence before the unload: a pod holding the GPU that no rule counts (no request, no claim,
// no runtime class, no annotation) is found by the holder scan, evicted as a GPU workload and waited for;
// the unload then succeeds, and the summary counts it.
TEST(UninstallMemory, APodFoundHoldingTheGpuOnTheHostIsEvictedBeforeTheUnload) {
  MemoryScenario s;
  s.deploy({.pods = {{.name = "hidden", .holds_gpu = true}, {.name = "bystander"}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, ::testing::ContainsRegex(
                         "workloads/hidden \\(pid [0-9]+ \\(gpu-workload\\)\\): found holding the GPU on the "
                         "host, and no rule took it off: evicting it as a GPU workload"));
  EXPECT_THAT(s.evicted(), ElementsAre("workloads/hidden")) << "the bystander holds nothing";
  EXPECT_THAT(r.log, Not(HasSubstr("driver is in use")));
  EXPECT_THAT(r.log, HasSubstr("evicted 1 GPU pod (1 found holding the GPU on the host)"));
  EXPECT_FALSE(s.driver_loaded());
}

struct FailureCase {
  std::string name;
  Fault fault = {};
  std::string expected;  // in the log
  // What the case adds to the common start (the default operands, an annotated client "agent", a GPU
  // workload "trainer") and to the settings, before the run.
  std::function<void(MemSetup&)> setup = nullptr;
  std::function<void(MemoryScenario&, manager::Settings&)> arrange = nullptr;
  bool driver = true;               // the nvidia module is loaded at the start
  bool fails_after_unload = false;  // the driver is gone by the failure (it is not loaded back)
};

void PrintTo(const FailureCase& c, std::ostream* os) {
  *os << c.name;
}

class UninstallMemoryFailure : public ::testing::TestWithParam<FailureCase> {};

// The messages of a run's log ("<level> <message>" lines) at warning level and above, in order.
std::vector<std::pair<std::string, std::string>> problems_of(const std::string& log) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    for (const std::string level : {"warning", "error", "critical"}) {
      if (line.rfind(level + " ", 0) == 0) out.emplace_back(level, line.substr(level.size() + 1));
    }
  }
  return out;
}

// A failure is logged once, where it is handled: the run's cause (its last critical line) is not logged
// again, nor its inner error by a level it passed on its way up.
void expect_cause_logged_once(const std::string& log) {
  const auto problems = problems_of(log);
  const auto last =
      std::find_if(problems.rbegin(), problems.rend(), [](const auto& p) { return p.first == "critical"; });
  ASSERT_NE(last, problems.rend()) << log;
  const std::string& cause = last->second;
  constexpr size_t kShortest = 12;  // shorter texts ("timed out") are words, not a logged error
  for (auto it = problems.rbegin(); it != problems.rend(); ++it) {
    if (it == last) continue;
    const std::string& other = it->second;
    EXPECT_EQ(other.find(cause), std::string::npos) << "the cause logged twice: " << other << "\n" << log;
    EXPECT_FALSE(other.size() >= kShortest && cause.find(other) != std::string::npos)
        << "logged on its way up to the cause \"" << cause << "\": " << other << "\n"
        << log;
  }
}

TEST_P(UninstallMemoryFailure, RestoresLabelsTaintAndCordon) {
  const auto& c = GetParam();
  MemoryScenario s("node-a", c.driver);
  MemSetup setup{.pods = {{.name = "agent", .gpu_client = "true"}, {.name = "trainer", .request_gpu = true}}};
  if (c.setup) c.setup(setup);
  s.deploy(setup);
  const auto before = s.state();
  auto settings = s.settings();
  if (c.arrange) c.arrange(s, settings);
  if (!c.fault.verb.empty() || !c.fault.body_part.empty()) s.cluster().fail(c.fault);

  const auto r = s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr(c.expected));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_EQ(s.state(), before) << r.log;
  EXPECT_EQ(s.driver_loaded(), c.driver && !c.fails_after_unload);
}

TEST_P(UninstallMemoryFailure, LogsItsCauseOnce) {
  const auto& c = GetParam();
  MemoryScenario s("node-a", c.driver);
  MemSetup setup{.pods = {{.name = "agent", .gpu_client = "true"}, {.name = "trainer", .request_gpu = true}}};
  if (c.setup) c.setup(setup);
  s.deploy(setup);
  auto settings = s.settings();
  if (c.arrange) c.arrange(s, settings);
  if (!c.fault.verb.empty() || !c.fault.body_part.empty()) s.cluster().fail(c.fault);

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 1) << r.log;
  expect_cause_logged_once(r.log);
}

// The operator's DRA plugin beside the default operands.
void with_dra(MemSetup& setup) {
  setup.operands.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", false, false});
}

void stuck_operand(MemSetup& setup) {
  setup.operands.push_back({"dcgm", "nvidia-dcgm", false, true});
}

void short_operand_wait(MemoryScenario& /*s*/, manager::Settings& settings) {
  settings.operand_wait_timeout = std::chrono::milliseconds(500);
}

const std::vector<FailureCase>& failure_cases() {
  static const std::vector<FailureCase> cases = {
      // The first write (the lease, the label pause and the cordon) went through but its answer was lost,
      // and the attempt that followed was refused (403: a refusal no retry fixes): it is undone all the
      // same. A first write refused outright changes nothing (tests/unit/uninstall_writes_test.cc).
      {.name = "FirstWriteTimedOutAfterTakingEffect",
       .expected = "injected fault",
       .arrange =
           [](MemoryScenario& s, manager::Settings&) {
             const std::string first = "\"unschedulable\":true";
             s.cluster().fail({.verb = "patch", .body_part = first, .status = 0, .applied = true});
             s.cluster().fail({.verb = "patch", .body_part = kMemPausedValue, .status = 403, .times = -1});
           }},
      // The client is known before the first write, so the taint goes with it: that write went through
      // with the taint but its answer was lost, and the attempt that followed was refused. The taint comes
      // off with the rest.
      {.name = "Taint",
       .expected = "injected fault",
       .arrange =
           [](MemoryScenario& s, manager::Settings&) {
             const std::string taint = "gpu-driver-manager.tainted\":\"";
             s.cluster().fail({.verb = "patch", .body_part = taint, .status = 0, .applied = true});
             s.cluster().fail({.verb = "patch", .body_part = kMemPausedValue, .status = 403, .times = -1});
           }},
      {.name = "WorkloadEviction",
       .fault = {.verb = "evict", .path_part = "trainer", .status = 403, .times = -1},
       .expected = "injected fault"},
      {.name = "ClientEviction",
       .fault = {.verb = "evict", .path_part = "agent", .status = 403, .times = -1},
       .expected = "injected fault"},
      {.name = "OperandWaitTimeout",
       .expected = "timed out",
       .setup = stuck_operand,
       .arrange = short_operand_wait},
      // A pod holding the GPU that this run does not evict (workload eviction off): the unload is refused.
      {.name = "UnloadRefused",
       .expected = "failed to unload NVIDIA driver kernel modules",
       .setup = [](MemSetup& m) { m.pods.push_back({.name = "hidden", .holds_gpu = true}); },
       .arrange = [](MemoryScenario&, manager::Settings& st) { st.enable_gpu_pod_eviction = false; }},
      // The host finds a pod holding the GPU that may not be evicted (no controller): no unload is tried.
      {.name = "HostHolderThatMayNotBeEvicted",
       .expected =
           "pods found holding the GPU on the host of node node-a cannot be evicted: workloads/hidden",
       .setup =
           [](MemSetup& m) { m.pods.push_back({.name = "hidden", .holds_gpu = true, .owner_kind = ""}); }},
      // A process outside any pod holds the GPU: named, no unload is tried.
      {.name = "HostHolderOutsideAnyPod",
       .expected = "the NVIDIA driver is held on node node-a outside any pod by pid 777 (nvidia-smi)",
       .arrange = [](MemoryScenario& s, manager::Settings&) { add_host_process(s, 777, "nvidia-smi"); }},
      // The full-drain fallback after a failed workload eviction fails as well.
      {.name = "DrainAfterAFailedEviction",
       .fault = {.verb = "evict", .path_part = "trainer", .status = 403, .times = -1},
       .expected = "Attempting node drain",
       .arrange = [](MemoryScenario&, manager::Settings& st) { st.enable_auto_drain = true; }},
      // The unload is refused (a holder the workload eviction cannot see); the drain that follows it cordons
      // the node and fails.
      {.name = "DrainAfterARefusedUnload",
       .fault = {.verb = "evict", .path_part = "hidden", .status = 403, .times = -1},
       .expected = "Unable to cleanup driver modules, attempting again with node drain...",
       .setup = [](MemSetup& m) { m.pods.push_back({.name = "hidden", .holds_gpu = true}); },
       .arrange =
           [](MemoryScenario&, manager::Settings& st) {
             st.enable_gpu_pod_eviction = false;
             st.enable_auto_drain = true;
           }},
      // A pod still holds an allocated GPU claim (this run evicts no workloads): the plugin cannot go.
      {.name = "DraClaimGuard",
       .expected = "pod(s) still hold GPU resource claims: workloads/claimer",
       .setup =
           [](MemSetup& m) {
             with_dra(m);
             m.pods.push_back({.name = "claimer", .gpu_claim = "claimer-gpu"});
           },
       .arrange =
           [](MemoryScenario& s, manager::Settings& st) {
             s.add_gpu_claim("claimer-gpu");
             st.enable_gpu_pod_eviction = false;
           }},
      {.name = "DraPluginClientEviction",
       .fault = {.verb = "evict", .path_part = "dra-plugin", .status = 403, .times = -1},
       .expected = "injected fault",
       .setup =
           [](MemSetup& m) {
             with_dra(m);
             m.pods.push_back({.name = "dra-plugin", .gpu_client = "true", .dra_plugin = true});
           }},
      {.name = "DraPluginWaitTimeout",
       .expected = "Failed to wait for dra-driver to shutdown",
       .setup =
           [](MemSetup& m) {
             m.operands.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", false, /*stuck=*/true});
           },
       .arrange = short_operand_wait},
      // On the no-driver path the plugin is the only thing paused.
      {.name = "NoDriverDraPluginWaitTimeout",
       .expected = "Failed to wait for dra-driver to shutdown",
       .setup =
           [](MemSetup& m) {
             m.operands.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", false, /*stuck=*/true});
           },
       .arrange = short_operand_wait,
       .driver = false},
      // After the unload: the node still comes back.
      {.name = "VfioUnbind",
       .expected = "unbind --all failed with exit code 1",
       .arrange = [](MemoryScenario&, manager::Settings& st) { st.vfio_manage = "false"; },
       .fails_after_unload = true},
      // The restore at the end of a successful path is refused twice (the write that ends the run, then the
      // restore on its own): it stays on the undo list, and the cleanup puts the labels back.
      {.name = "RestoreAtTheEnd",
       .fault = {.verb = "patch",
                 .body_part = "\"nvidia.com/gpu.deploy.dcgm-exporter\":\"true\"",
                 .status = 403,
                 .times = 2},
       .expected = "failed in phase restore",
       .fails_after_unload = true},
      {.name = "MofedWaitTimeout",
       .expected = "MOFED driver not ready after",
       .arrange =
           [](MemoryScenario& s, manager::Settings& st) {
             s.add_mellanox_device();
             st.gpu_direct_rdma_enabled = true;
             st.mofed_wait_timeout = std::chrono::milliseconds(500);
           },
       .fails_after_unload = true},
  };
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EachStep, UninstallMemoryFailure, ::testing::ValuesIn(failure_cases()),
                         [](const ::testing::TestParamInfo<FailureCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(UninstallMemory, SigtermDuringTheOperandWaitRestoresTheNodeAndExits143) {
  MemoryScenario s;
  auto ops = default_mem_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  s.deploy({.operands = ops,
            .pods = {{.name = "agent", .gpu_client = "true", .stuck = true},
                     {.name = "trainer", .request_gpu = true, .stuck = true}}});
  const auto before = s.state();
  CancelToken sigterm;
  std::thread killer([&] {
    // Once all three sides have changed the node: the labels paused, the taint and the cordon on.
    eventually(
        [&] {
          const auto st = s.state();
          return st.unschedulable && st.annotations.count("nvidia.com/gpu-driver-manager.tainted") > 0 &&
                 s.label(kPrefix + "dcgm") == kMemPausedValue;
        },
        kPatientSeconds);
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
