// uninstall_driver's failure and ownership paths on a real control plane + node-sim: a PDB-blocked GPU pod,
// an admin's cordon, the full-drain fallback, SIGTERM in the middle of the operand wait, an unload refused
// because a GPU pod's process holds the driver (named by pod).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class UninstallFailure : public UninstallSuite {};

void expect_labels(const Scenario& s, const std::vector<Operand>& ops, const std::string& value) {
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), value) << op.label;
}

TEST_F(UninstallFailure, PdbBlockedGpuPodFailsAtTheDrainTimeoutAndRestoresTheNode) {
  Scenario s(cluster(), "pdb");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("inference");
  s.block_with_pdb("inference-budget", "inference");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto workload_before = s.running_uids(s.workload_ns());

  auto r = s.run(sa_kubeconfig(), {{"DRAIN_TIMEOUT_SECONDS", "8s"}});

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/inference-"));
  EXPECT_THAT(r.log, HasSubstr("disruption budget inference-budget"));  // the API server's cause, re-logged
  EXPECT_THAT(r.log, HasSubstr("Failed to drain node of GPU pods"));
  EXPECT_THAT(r.log, HasSubstr("cannot proceed until all GPU pods are drained from the node"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node pdb"));
  EXPECT_FALSE(s.unschedulable());
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned"));
  EXPECT_EQ(s.running_uids(s.workload_ns()), workload_before);
  EXPECT_TRUE(s.sim().refcnt().has_value());
  expect_labels(s, ops, "true");
  // The failure is recorded on the node for `kubectl describe node`.
  const auto events = cluster().get_json(
      {"events", "-n", "default", "--field-selector", "involvedObject.kind=Node,involvedObject.name=pdb"});
  bool recorded = false;
  for (const auto& e : events["items"]) {
    if (e.value("reason", "") == "DriverUninstallFailed" && e.value("type", "") == "Warning" &&
        e.value("message", "").find("inference-budget") != std::string::npos) {
      recorded = true;
    }
  }
  EXPECT_TRUE(recorded) << events.dump(2);
}

TEST_F(UninstallFailure, RefusedUnloadNamesThePodWhoseProcessHoldsTheDriver) {
  // The upgrade policy owns eviction, so the workload keeps running and its (simulated) process keeps
  // /dev/nvidia0 open: the unload is refused and the message names the pod, found through the process's
  // cgroup and the node's pods.
  Scenario s(cluster(), "holder");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  auto r = s.run(sa_kubeconfig());

  EXPECT_EQ(r.exit_code, 1) << r.log;
  const std::string held =
      "nvidia: held by pid [0-9]+ \\(gpu-workload\\) in pod " + s.workload_ns() + "/trainer-";
  // Named once, in the run's error (a failure is logged by the level that handles it).
  EXPECT_THAT(r.log, ::testing::Not(::testing::ContainsRegex("level=error msg=" + held))) << r.log;
  EXPECT_THAT(r.log,
              ::testing::ContainsRegex("level=fatal msg=failed to unload NVIDIA driver kernel modules: "
                                       ".*none was unloaded.*" +
                                       held));
  EXPECT_THAT(r.log, Not(HasSubstr("a host process, not a pod")));
  EXPECT_TRUE(s.sim().refcnt().has_value()) << "module must stay loaded (all or nothing)";
  expect_labels(s, ops, "true");
}

TEST_F(UninstallFailure, AnAdminsCordonSurvivesASuccessfulRun) {
  Scenario s(cluster(), "admin");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto workload_before = s.running_uids(s.workload_ns());
  kubectl_ok(cluster(), {"cordon", "admin"});

  auto r = s.run(sa_kubeconfig());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Node admin is already cordoned by someone else; it will stay cordoned"));
  EXPECT_THAT(r.log, Not(HasSubstr("Uncordoning node")));
  EXPECT_TRUE(s.unschedulable());
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned"));
  EXPECT_FALSE(s.sim().refcnt().has_value());
  for (const auto& uid : workload_before) {
    EXPECT_EQ(s.running_uids(s.workload_ns()).count(uid), 0U) << "the GPU pod was evicted";
  }
  expect_labels(s, ops, "true");
}

TEST_F(UninstallFailure, LegacyUncordonClearsEvenAnAdminsCordon) {
  Scenario s(cluster(), "legacy");
  s.deploy_operands(default_operands());
  s.wait_running(s.operator_ns(), default_operands().size());
  kubectl_ok(cluster(), {"cordon", "legacy"});

  auto r = s.run(sa_kubeconfig(), {{"UNCORDON_ALWAYS", "true"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node legacy"));
  EXPECT_FALSE(s.unschedulable());
}

TEST_F(UninstallFailure, DrainFallbackEvictsNonGpuHoldersWithKubectlDrainSemantics) {
  Scenario s(cluster(), "drain");
  s.deploy_operands(default_operands());
  // Holds the GPU without requesting it: GPU-pod eviction cannot see it, the unload fails, the drain helps.
  s.deploy_gpu_workload("agent", 1, /*request_gpu=*/false, {{"drain", "yes"}});
  s.deploy_plain("bystander");  // not matched by DRAIN_POD_SELECTOR_LABEL: stays
  s.deploy_daemonset("node-agent", s.workload_ns(), {{kNodeLabel, "drain"}}, false);  // DaemonSet: ignored
  s.wait_running(s.operator_ns(), default_operands().size());
  s.wait_running(s.workload_ns(), 3);
  const auto agent_before = s.running_uids(s.workload_ns(), "app=agent");
  const auto bystander_before = s.running_uids(s.workload_ns(), "app=bystander");
  const auto ds_before = s.running_uids(s.workload_ns(), "app=node-agent");

  auto r = s.run(sa_kubeconfig(), {{"ENABLE_GPU_POD_EVICTION", "false"},
                                   {"ENABLE_AUTO_DRAIN", "true"},
                                   {"DRAIN_POD_SELECTOR_LABEL", "drain=yes"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Unable to cleanup driver modules, attempting again with node drain..."));
  EXPECT_THAT(r.log, HasSubstr("Cordoning node drain"));
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/agent-"));
  EXPECT_THAT(r.log, Not(HasSubstr("evicting pod " + s.workload_ns() + "/bystander-")));
  EXPECT_THAT(r.log, HasSubstr("Successfully uninstalled nvidia driver components"));
  EXPECT_FALSE(s.sim().refcnt().has_value());
  EXPECT_FALSE(s.unschedulable());
  for (const auto& uid : agent_before) EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent").count(uid), 0U);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=bystander"), bystander_before);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=node-agent"), ds_before);
}

TEST_F(UninstallFailure, SigtermDuringTheOperandWaitRestoresTheNodeAndExits143) {
  Scenario s(cluster(), "sigterm");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // never finishes terminating
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  BackgroundProcess dm({bin_path("driver-manager"), "uninstall_driver"},
                       cluster().state_dir() + "/driver-manager-sigterm.log",
                       s.env(sa_kubeconfig(), {{"OPERAND_WAIT_TIMEOUT", "300s"}}));
  ASSERT_TRUE(eventually(
      [&] { return dm.log().find("Still waiting for GPU operand pods") != std::string::npos; }, 60))
      << dm.log();
  EXPECT_EQ(s.label(deploy_label("dcgm")), "paused-for-driver-upgrade");
  dm.signal(SIGTERM);
  const int code = dm.wait(60);
  const std::string log = dm.log();

  EXPECT_EQ(code, 143) << log;
  EXPECT_THAT(log, HasSubstr("Received SIGTERM: restoring the node before exiting"));
  EXPECT_THAT(log, HasSubstr("Performing cleanup on failure"));
  expect_labels(s, ops, "true");
  EXPECT_FALSE(s.unschedulable());
  EXPECT_TRUE(s.sim().refcnt().has_value());
}

// A GPU workload eviction that fails (a budget refuses it, no drain fallback) while an operand and an
// annotated client are still terminating ends the run at once: the operand wait and the client reset are
// stopped (their pods still terminate, no failure of theirs is reported), the run's error is the eviction's,
// and the node is restored: labels, taint, cordon.
TEST_F(UninstallFailure, AFailingWorkloadEvictionStopsTheOtherStepsAndRestoresTheNode) {
  Scenario s(cluster(), "wlfail");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // never finishes terminating
  s.deploy_operands(ops);
  s.deploy_client({.name = "agent", .stuck = true});  // annotated, never finishes terminating
  s.deploy_gpu_workload("inference");
  s.block_with_pdb("inference-budget", "inference");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  ASSERT_TRUE(eventually([&] {
    const auto pdb = cluster().get_json({"pdb", "inference-budget", "-n", s.workload_ns()});
    return pdb["status"].value("expectedPods", 0) == 1;
  })) << "the disruption controller did not process the budget";
  const NodeState before = s.state();

  auto r = s.run(sa_kubeconfig(), {{"ENABLE_AUTO_DRAIN", "false"},
                                   {"DRAIN_TIMEOUT_SECONDS", "10s"},
                                   {"OPERAND_WAIT_TIMEOUT", "0"},
                                   {"GPU_CLIENT_EVICTION_TIMEOUT", "0"}});

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("disruption budget inference-budget"));
  EXPECT_THAT(r.log, HasSubstr("Failed to drain node of GPU pods"));
  EXPECT_THAT(r.log, HasSubstr("cannot proceed until all GPU pods are drained from the node"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_THAT(r.log, Not(HasSubstr("Failed to wait for nvidia-dcgm to shutdown")));
  EXPECT_THAT(r.log, Not(HasSubstr("failed to evict GPU operator components")));
  EXPECT_THAT(r.log, Not(HasSubstr("failed to reset GPU client pods")));
  EXPECT_THAT(r.log, Not(HasSubstr("Checking if the currently loaded NVIDIA driver")));
  // Both were in flight when the eviction failed, and were stopped, not waited out.
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/agent-"));
  const auto held = s.pods_in(s.operator_ns(), "app=nvidia-dcgm");
  ASSERT_EQ(held.size(), 1U);
  EXPECT_TRUE(held.front()["metadata"].contains("deletionTimestamp"));
  const auto agent = s.pods_in(s.workload_ns(), "app=agent");
  EXPECT_EQ(std::count_if(agent.begin(), agent.end(),
                          [](const json& p) { return p["metadata"].contains("deletionTimestamp"); }),
            1);
  // Restored: operand labels back, the taint and the cordon gone with their annotations.
  const NodeState after = s.state();
  EXPECT_EQ(after.labels, before.labels);
  EXPECT_EQ(after.annotations, before.annotations);
  EXPECT_EQ(after.taints, before.taints);
  EXPECT_FALSE(after.unschedulable);
  EXPECT_TRUE(s.sim().refcnt().has_value());
  kubectl_ok(cluster(),
             {"-n", s.workload_ns(), "delete", "pods", "-l", "app=agent", "--force", "--grace-period=0"});
}

// SIGTERM while the operand wait, the client reset and the workload eviction are all in flight: each is
// stopped, and the node is exactly as before (labels, annotations, taints, schedulability), exit 143.
TEST_F(UninstallFailure, SigtermWhileOperandsClientsAndWorkloadsGoRestoresTheNodeAndExits143) {
  Scenario s(cluster(), "sigterm-all");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  s.deploy_operands(ops);
  s.deploy_client({.name = "agent", .stuck = true});
  s.deploy_client({.name = "trainer", .gpu_client = "", .request_gpu = true, .stuck = true});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  const NodeState before = s.state();

  BackgroundProcess dm({bin_path("driver-manager"), "uninstall_driver"},
                       cluster().state_dir() + "/driver-manager-sigterm-all.log",
                       s.env(sa_kubeconfig(), {{"OPERAND_WAIT_TIMEOUT", "300s"}}));
  ASSERT_TRUE(wait_for_log(dm, "evicting pod " + s.workload_ns() + "/agent-")) << dm.log();
  ASSERT_TRUE(wait_for_log(dm, "evicting pod " + s.workload_ns() + "/trainer-")) << dm.log();
  ASSERT_TRUE(wait_for_log(dm, "Still waiting for GPU operand pods")) << dm.log();
  // All three sides have changed the node.
  EXPECT_EQ(s.label(deploy_label("dcgm")), "paused-for-driver-upgrade");
  EXPECT_TRUE(s.unschedulable());
  EXPECT_TRUE(s.has_annotation("nvidia.com/gpu-driver-manager.tainted"));
  dm.signal(SIGTERM);
  const int code = dm.wait(60);
  const std::string log = dm.log();

  EXPECT_EQ(code, 143) << log;
  EXPECT_THAT(log, HasSubstr("Received SIGTERM: restoring the node before exiting"));
  const NodeState after = s.state();
  EXPECT_EQ(after.labels, before.labels);
  EXPECT_EQ(after.annotations, before.annotations);
  EXPECT_EQ(after.taints, before.taints);
  EXPECT_EQ(after.unschedulable, before.unschedulable);
  EXPECT_TRUE(s.sim().refcnt().has_value());
  kubectl_ok(cluster(), {"-n", s.workload_ns(), "delete", "pods", "--all", "--force", "--grace-period=0"});
}

}  // namespace
}  // namespace dm::test::uninstall
