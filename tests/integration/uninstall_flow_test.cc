// uninstall_driver end to end on a real control plane + node-sim, as a least-privilege service account:
// the main path, the auto-upgrade policy path, the skip / no-driver / pre-installed paths, FORCE_REINSTALL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class UninstallFlow : public UninstallSuite {};

bool disjoint(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& x : a) {
    if (b.count(x) > 0) return false;
  }
  return true;
}

// Evictions the driver-manager's user asked for since audit index `from`.
size_t evictions_since(const TestCluster& c, const std::string& user, size_t from) {
  size_t n = 0;
  for (const auto& e : write_requests(c, user, from)) {
    if (e.contains("objectRef") && e["objectRef"].value("subresource", "") == "eviction") ++n;
  }
  return n;
}

void expect_labels(const Scenario& s, const std::vector<Operand>& ops, const std::string& value) {
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), value) << op.label;
}

TEST_F(UninstallFlow, PolicyOffEvictionOnTakesEverythingOffUnloadsAndBringsItBack) {
  Scenario s(cluster(), "happy");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto operands_before = s.running_uids(s.operator_ns());
  const auto workload_before = s.running_uids(s.workload_ns());
  ASSERT_EQ(s.sim().refcnt(), 2) << "dcgm-exporter and the trainer hold the GPU";
  write_file(s.sim_path("/run/nvidia/nvidia-driver.pid"), "4242\n");
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-old\n");

  // The old driver root is a real mount tree, in a private mount namespace of the driver-manager run; the
  // wrapper reports whether it is still mounted after driver-manager exits.
  const std::string root = s.sim_path("/run/nvidia/driver");
  std::filesystem::create_directories(root);
  const std::string script =
      "mount -t tmpfs dm-driver-root \"$ROOT\" && mkdir -p \"$ROOT/dev\" && mount -t tmpfs dm-driver-dev "
      "\"$ROOT/dev\" || exit 99\n"
      "\"$DM\" uninstall_driver; rc=$?\n"
      "if mountpoint -q \"$ROOT\" || mountpoint -q \"$ROOT/dev\"; then echo DRIVER-ROOT-STILL-MOUNTED; fi\n"
      "exit $rc\n";
  auto env = s.env(sa_kubeconfig());
  env["ROOT"] = root;
  env["DM"] = bin_path("driver-manager");
  auto out = run_command({"unshare", "-m", "--propagation", "private", "sh", "-c", script}, {}, env);
  const std::string log = out.out + out.err;

  ASSERT_EQ(out.exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_THAT(log, HasSubstr("Waiting for nvidia-dcgm-exporter to shutdown"));
  EXPECT_THAT(log, HasSubstr("Cordoning node happy"));
  EXPECT_THAT(log, HasSubstr("GPU pod - " + s.workload_ns() + "/trainer-"));
  EXPECT_THAT(log, HasSubstr("evicting pod " + s.workload_ns() + "/trainer-"));
  EXPECT_THAT(log, HasSubstr("Successfully unmounted /run/nvidia/driver and all its submounts"));
  EXPECT_THAT(log, Not(HasSubstr("DRIVER-ROOT-STILL-MOUNTED")));
  EXPECT_THAT(log, HasSubstr("Uncordoning node happy"));
  // The simulated unload succeeds only when every holder of the module is gone.
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "nvidia module still loaded";
  EXPECT_FALSE(std::filesystem::exists(s.sim_path("/run/nvidia/nvidia-driver.pid")));
  expect_labels(s, ops, "true");
  EXPECT_FALSE(s.unschedulable());
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned"));

  // Operands and the workload come back as new pods.
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.operator_ns()).size() == ops.size(); }, 60));
  EXPECT_TRUE(disjoint(s.running_uids(s.operator_ns()), operands_before));
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.workload_ns()).size() == 1; }, 60));
  EXPECT_TRUE(disjoint(s.running_uids(s.workload_ns()), workload_before));
}

TEST_F(UninstallFlow, PolicyOnNeverEvictsAndGivesGuidanceWhenAWorkloadHoldsTheGpu) {
  Scenario s(cluster(), "policy");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto workload_before = s.running_uids(s.workload_ns());
  const size_t audit_from = cluster().audit_events().size();

  auto r = s.run(sa_kubeconfig());

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(
      r.log,
      HasSubstr(
          "GPU pod eviction by driver-manager has been superseded by the GPU Operator's upgrade policy"));
  EXPECT_THAT(r.log, HasSubstr("Could not unload NVIDIA driver kernel modules, driver is in use"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  EXPECT_THAT(r.log,
              HasSubstr("kubectl label node policy nvidia.com/gpu-driver-upgrade-state=upgrade-required"));
  EXPECT_THAT(r.log, Not(HasSubstr("Cordoning node")));
  EXPECT_EQ(evictions_since(cluster(), sa_user(), audit_from), 0U);
  EXPECT_FALSE(s.unschedulable());
  EXPECT_TRUE(s.sim().refcnt().has_value()) << "module must stay loaded (all or nothing)";
  EXPECT_EQ(s.running_uids(s.workload_ns()), workload_before) << "the workload must not be touched";
  expect_labels(s, ops, "true");
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.operator_ns()).size() == ops.size(); }, 60));
}

TEST_F(UninstallFlow, SkipPathBouncesOperandsButKeepsTheDriverAndTheWorkloads) {
  Scenario s(cluster(), "skip");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto operands_before = s.running_uids(s.operator_ns());
  const auto workload_before = s.running_uids(s.workload_ns());
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");
  write_file(s.sim_path("/run/nvidia/nvidia-driver.pid"), "4242\n");

  auto r = s.run(sa_kubeconfig(), {{"DRIVER_CONFIG_DIGEST", "digest-same"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log,
              HasSubstr("The NVIDIA driver is already loaded with the desired version and configuration"));
  EXPECT_THAT(r.log, HasSubstr("Cleaning up stale mounts and state files..."));
  EXPECT_THAT(r.log, Not(HasSubstr("Cordoning node")));
  EXPECT_THAT(r.log, Not(HasSubstr("Driver uninstallation completed successfully")));
  EXPECT_TRUE(s.sim().refcnt().has_value()) << "the driver must stay loaded";
  EXPECT_FALSE(std::filesystem::exists(s.sim_path("/run/nvidia/nvidia-driver.pid")));
  EXPECT_EQ(s.running_uids(s.workload_ns()), workload_before);
  expect_labels(s, ops, "true");
  EXPECT_FALSE(s.unschedulable());
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.operator_ns()).size() == ops.size(); }, 60));
  EXPECT_TRUE(disjoint(s.running_uids(s.operator_ns()), operands_before)) << "operands are bounced";
}

TEST_F(UninstallFlow, ForceReinstallUninstallsEvenWhenTheDigestMatches) {
  Scenario s(cluster(), "force");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");

  auto r = s.run(sa_kubeconfig(), {{"DRIVER_CONFIG_DIGEST", "digest-same"}, {"FORCE_REINSTALL", "true"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Force reinstall is enabled"));
  EXPECT_THAT(r.log, Not(HasSubstr("skipping the uninstallation")));
  EXPECT_THAT(r.log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_FALSE(s.sim().refcnt().has_value());
  expect_labels(s, ops, "true");
}

TEST_F(UninstallFlow, NoDriverPathHealsACrashedRunWithoutEvictingAnything) {
  NodeSimOptions o;
  o.no_driver = true;
  Scenario s(cluster(), "nodriver", o);
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  // What a crashed earlier run leaves behind: a paused label and our cordon.
  s.label_node({{deploy_label("device-plugin"), "paused-for-driver-upgrade"}});
  kubectl_ok(cluster(), {"cordon", "nodriver"});
  s.annotate_node("nvidia.com/gpu-driver-manager.cordoned", "true");
  s.wait_running(s.operator_ns(), ops.size() - 1);
  const auto workload_before = s.running_uids(s.workload_ns());
  write_file(s.sim_path("/run/nvidia/nvidia-driver.pid"), "4242\n");
  const size_t audit_from = cluster().audit_events().size();

  auto r = s.run(sa_kubeconfig());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("No NVIDIA driver loaded, skipping eviction of GPU clients and workloads"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node nodriver"));
  EXPECT_EQ(evictions_since(cluster(), sa_user(), audit_from), 0U);
  EXPECT_FALSE(s.unschedulable());
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned"));
  expect_labels(s, ops, "true");  // the paused device-plugin label is healed
  EXPECT_FALSE(std::filesystem::exists(s.sim_path("/run/nvidia/nvidia-driver.pid")));
  EXPECT_EQ(s.running_uids(s.workload_ns()), workload_before);
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.operator_ns()).size() == ops.size(); }, 60));
}

TEST_F(UninstallFlow, PreInstalledHostDriverDisablesTheContainerizedDriverAndFails) {
  Scenario s(cluster(), "preinst");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.label_node({{deploy_label("driver"), "true"}});
  const std::string smi = s.sim_path("/host/usr/bin/nvidia-smi");
  std::filesystem::create_directories(std::filesystem::path(smi).parent_path());
  write_file(smi, "#!/bin/sh\necho 550.54.15\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);

  auto r = s.run(sa_kubeconfig(), {{"PRE_INSTALLED_SLEEP", "1s"}});

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log,
              HasSubstr("NVIDIA GPU driver is already pre-installed on the node, disabling the containerized "
                        "driver"));
  EXPECT_THAT(r.log, HasSubstr("driver is pre-installed on host"));
  EXPECT_EQ(s.label(deploy_label("driver")), "pre-installed");
  expect_labels(s, ops, "true");  // operands were never paused
  EXPECT_TRUE(s.sim().refcnt().has_value());
}

TEST_F(UninstallFlow, ClientLabelAndCustomLabelDaemonSetsAreTakenOffAndWaitedFor) {
  Scenario s(cluster(), "labels");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  // Third-party clients holding the GPU, removed only through their node labels (upstream never waited for
  // them).
  s.deploy_daemonset("client-agent", s.workload_ns(), {{deploy_label("client"), "true"}}, true);
  s.deploy_daemonset("custom-agent", s.workload_ns(), {{"example.com/gpu-agent", "true"}}, true);
  s.label_node({{deploy_label("client"), "true"}, {"example.com/gpu-agent", "true"}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  const auto clients_before = s.running_uids(s.workload_ns());

  auto r = s.run(sa_kubeconfig(), {{"NODE_LABEL_FOR_GPU_POD_EVICTION", "example.com/gpu-agent=true"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("holds a value; only the label key"));
  EXPECT_THAT(
      r.log, HasSubstr("Shutting down GPU clients using node selector label \"example.com/gpu-agent\"=true"));
  EXPECT_THAT(
      r.log,
      HasSubstr("Waiting for any daemon set pods with nodeSelector key nvidia.com/gpu.deploy.client to "
                "terminate"));
  EXPECT_THAT(
      r.log,
      HasSubstr("Waiting for any daemon set pods with nodeSelector key example.com/gpu-agent to terminate"));
  // The unload succeeded, so both label-selected clients were gone by then.
  EXPECT_FALSE(s.sim().refcnt().has_value());
  EXPECT_EQ(s.label(deploy_label("client")), "true");
  EXPECT_EQ(s.label("example.com/gpu-agent"), "true");
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.workload_ns()).size() == 2; }, 60));
  EXPECT_TRUE(disjoint(s.running_uids(s.workload_ns()), clients_before));
}

TEST_F(UninstallFlow, DraKubeletPluginIsDrainedLastAfterTheGpuWorkloads) {
  Scenario s(cluster(), "dra");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_operands({{"dra-driver", "nvidia-dra-driver-kubelet-plugin", true, false}});
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size() + 1);
  s.wait_running(s.workload_ns(), 1);

  auto r = s.run(sa_kubeconfig());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  // The plugin keeps running through the pause batch and the GPU workload eviction.
  const auto evicted = r.log.find("evicting pod " + s.workload_ns() + "/trainer-");
  const auto guard = r.log.find("Checking that no pod on the node still holds a GPU resource claim");
  const auto plugin = r.log.find("Draining the DRA kubelet-plugin (last, after its claim-holding clients)");
  const auto unload = r.log.find("Unloading NVIDIA driver kernel modules");
  ASSERT_NE(evicted, std::string::npos) << r.log;
  ASSERT_NE(guard, std::string::npos) << r.log;
  ASSERT_NE(plugin, std::string::npos) << r.log;
  ASSERT_NE(unload, std::string::npos) << r.log;
  EXPECT_LT(evicted, guard);
  EXPECT_LT(guard, plugin);
  EXPECT_LT(plugin, unload);
  EXPECT_THAT(r.log, HasSubstr("Waiting for dra-driver to shutdown"));
  EXPECT_FALSE(s.sim().refcnt().has_value());
  EXPECT_EQ(s.label(deploy_label("dra-driver")), "true");
  expect_labels(s, ops, "true");
}

// The GPU workloads do not wait for the operands: with one operand pod held terminating, the workload is
// evicted (the API server's audit log has the eviction, the pod its deletionTimestamp) from the cordoned
// node while that operand pod is still on the node; the run goes on once the operand is gone.
TEST_F(UninstallFlow, GpuWorkloadIsEvictedWhileAnOperandIsStillTerminating) {
  Scenario s(cluster(), "beside");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // held until the test removes it
  s.deploy_operands(ops);
  s.deploy_client({.name = "trainer",
                   .gpu_client = "",
                   .terminate_after = "0.5",
                   .request_gpu = true,
                   .grace_period_seconds = 300});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto workload_before = s.running_uids(s.workload_ns());
  const size_t audit_from = cluster().audit_events().size();

  auto dm = s.start(sa_kubeconfig(), cluster().state_dir() + "/driver-manager-beside.log");
  auto trainer_evictions = [&] {
    size_t n = 0;
    for (const auto& e : write_requests(cluster(), sa_user(), audit_from)) {
      const auto& ref = e.value("objectRef", json::object());
      if (ref.value("subresource", "") == "eviction" && ref.value("name", "").rfind("trainer-", 0) == 0) ++n;
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] { return trainer_evictions() == 1; }, 90)) << dm->log();
  // The eviction went out while the operand still terminates, and before the run saw the operands gone.
  const auto held = s.pods_in(s.operator_ns(), "app=nvidia-dcgm");
  ASSERT_EQ(held.size(), 1U) << dm->log();
  EXPECT_TRUE(held.front()["metadata"].contains("deletionTimestamp")) << held.front().dump();
  EXPECT_THAT(dm->log(), Not(HasSubstr("All GPU operand pods on the node have shut down")));
  EXPECT_TRUE(s.unschedulable());
  EXPECT_TRUE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned"));
  // The original pod is terminating or gone (its 300 s grace period is not waited out: node-sim ends it).
  for (const auto& p : s.pods_in(s.workload_ns(), "app=trainer")) {
    if (workload_before.count(p["metadata"].value("uid", "")) > 0) {
      EXPECT_TRUE(p["metadata"].contains("deletionTimestamp")) << p.dump();
    }
  }

  kubectl_ok(cluster(), {"-n", s.operator_ns(), "delete", "pods", "-l", "app=nvidia-dcgm", "--force",
                         "--grace-period=0"});
  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  const std::string log = dm->log();
  EXPECT_THAT(log, HasSubstr("All GPU operand pods on the node have shut down"));
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_EQ(trainer_evictions(), 1U) << "evicted once";
  EXPECT_FALSE(s.sim().refcnt().has_value());
  expect_labels(s, ops, "true");
  EXPECT_FALSE(s.unschedulable());
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned"));
  EXPECT_TRUE(eventually([&] { return s.running_uids(s.workload_ns()).size() == 1; }, 60));
  EXPECT_TRUE(disjoint(s.running_uids(s.workload_ns()), workload_before));
}

}  // namespace
}  // namespace dm::test::uninstall
