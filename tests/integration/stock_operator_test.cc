// Safe under a stock GPU Operator: the default gpu-client taint is one the operator's DaemonSets tolerate,
// a run whose own pod would not tolerate the configured taint refuses before any write, the SIGTERM cleanup
// is budgeted inside the own pod's grace period, and a leftover cordon of ours is not undone under the
// upgrade controller's feet.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kOwnerAnnotation = "nvidia.com/gpu-driver-manager.tainted";
constexpr const char* kCordonAnnotation = "nvidia.com/gpu-driver-manager.cordoned";

class StockOperator : public UninstallSuite {
 protected:
  // An annotated third-party client Deployment (one replica) on the scenario's node.
  static void deploy_client(const Scenario& s, const std::string& name) {
    cluster().apply("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name +
                    "\n  namespace: " + s.workload_ns() +
                    "\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: " + name +
                    "\n  template:\n    metadata:\n      labels:\n        app: " + name +
                    "\n      annotations:\n        nvidia.com/gpu.client: \"true\"\n"
                    "        node-sim/terminate-after-seconds: \"0.5\"\n"
                    "    spec:\n      terminationGracePeriodSeconds: 5\n      nodeSelector:\n        " +
                    std::string(kNodeLabel) + ": " + s.node() +
                    "\n      containers:\n      - name: main\n        image: example.com/gpu-agent:1\n");
  }
  // A Pod object standing for the driver pod driver-manager runs in (bound to no real node, so nothing
  // runs it): its tolerations and grace period are what the run reads.
  static void create_own_pod(const Scenario& s, const std::string& name, const std::string& tolerations_yaml,
                             int grace_seconds) {
    cluster().apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
                    "\n  namespace: " + s.operator_ns() + "\nspec:\n  nodeName: no-such-node-" + s.node() +
                    "\n  terminationGracePeriodSeconds: " + std::to_string(grace_seconds) +
                    "\n  tolerations:\n" + tolerations_yaml +
                    "  containers:\n  - name: k8s-driver-manager\n    image: example.com/driver-manager:1\n");
  }
  static json taints(const Scenario& s) {
    const auto n = s.node_json();
    return n["spec"].contains("taints") ? n["spec"]["taints"] : json::array();
  }
};

TEST_F(StockOperator, DefaultTaintIsTheOneTheOperatorsDaemonSetsTolerate) {
  Scenario s(cluster(), "stock-default");
  deploy_client(s, "agent");
  s.wait_running(s.workload_ns(), 1);
  const auto before = s.running_uids(s.workload_ns());
  // Hold the run after the unload so the taint can be seen (MOFED wait, released below).
  run_command({"mkdir", "-p", s.sim_path("/sys/bus/pci/devices/0000:3b:00.0")});
  run_command({"sh", "-c", "echo 0x15b3 > " + s.sim_path("/sys/bus/pci/devices/0000:3b:00.0/vendor")});
  BackgroundProcess dm({bin_path("driver-manager"), "uninstall_driver"},
                       cluster().state_dir() + "/dm-stock-default.log",
                       s.env(sa_kubeconfig(), {{"GPU_DIRECT_RDMA_ENABLED", "true"}}));
  ASSERT_TRUE(
      eventually([&] { return dm.log().find("Waiting for MOFED to be installed") != std::string::npos; }, 90))
      << dm.log();
  const json t = taints(s);
  ASSERT_EQ(t.size(), 1U) << t.dump();
  EXPECT_EQ(t[0].value("key", ""), "nvidia.com/gpu");
  EXPECT_EQ(t[0].value("effect", ""), "NoSchedule");
  EXPECT_FALSE(t[0].contains("value")) << t.dump();
  EXPECT_TRUE(s.has_annotation(kOwnerAnnotation));
  for (const auto& uid : before) EXPECT_EQ(s.running_uids(s.workload_ns()).count(uid), 0U) << "client reset";

  run_command({"mkdir", "-p", s.sim_path("/run/mellanox/drivers")});
  run_command({"touch", s.sim_path("/run/mellanox/drivers/.driver-ready")});
  ASSERT_EQ(dm.wait(120), 0) << dm.log();
  EXPECT_TRUE(taints(s).empty()) << taints(s).dump();
  EXPECT_FALSE(s.has_annotation(kOwnerAnnotation));
  s.wait_running(s.workload_ns(), 1);  // the client is back
}

TEST_F(StockOperator, OwnPodNotToleratingTheTaintIsRefusedBeforeAnyWrite) {
  Scenario s(cluster(), "stock-guard");
  s.deploy_operands(default_operands());
  s.wait_running(s.operator_ns(), default_operands().size());
  // A client to reset: the run would taint the node (without one it adds no taint and goes on).
  deploy_client(s, "agent");
  s.wait_running(s.workload_ns(), 1);
  // The operator's stock toleration only: nvidia.com/gpu, not a dedicated key.
  create_own_pod(s, "nvidia-driver-daemonset-abcde",
                 "  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule\n", 30);
  const size_t from = cluster().audit_events().size();

  auto r = s.run(sa_kubeconfig(), {{"HOSTNAME", "nvidia-driver-daemonset-abcde"},
                                   {"GPU_CLIENT_TAINT", "example.com/gpu-maintenance=driver:NoSchedule"}});

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("this pod (" + s.operator_ns() +
                               "/nvidia-driver-daemonset-abcde) does not tolerate the GPU client taint "
                               "example.com/gpu-maintenance=driver:NoSchedule"));
  EXPECT_THAT(r.log, HasSubstr("keep nvidia.com/gpu in it"));
  EXPECT_TRUE(write_requests(cluster(), sa_user(), from).empty()) << "nothing written, no Event";
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "true");
}

TEST_F(StockOperator, OwnPodToleratingADedicatedTaintRunsAndItsGracePeriodBudgetsTheCleanup) {
  Scenario s(cluster(), "stock-grace");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // keeps the run in the operand wait
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());
  create_own_pod(s, "driver-pod",
                 "  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule\n"
                 "  - key: example.com/gpu-maintenance\n    operator: Exists\n",
                 12);
  BackgroundProcess dm(
      {bin_path("driver-manager"), "uninstall_driver"}, cluster().state_dir() + "/dm-grace.log",
      s.env(sa_kubeconfig(), {{"POD_NAME", "driver-pod"},
                              {"POD_NAMESPACE", s.operator_ns()},
                              {"OPERAND_WAIT_TIMEOUT", "300s"},
                              {"GPU_CLIENT_TAINT", "example.com/gpu-maintenance=driver:NoSchedule"}}));
  ASSERT_TRUE(eventually(
      [&] { return dm.log().find("Still waiting for GPU operand pods") != std::string::npos; }, 60))
      << dm.log();
  EXPECT_THAT(dm.log(),
              HasSubstr("Running in pod " + s.operator_ns() +
                        "/driver-pod (terminationGracePeriodSeconds 12): SIGTERM cleanup budget 7s"));
  dm.signal(SIGTERM);
  ASSERT_EQ(dm.wait(60), 143) << dm.log();
  EXPECT_EQ(s.label(deploy_label("dcgm")), "true");
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.lease")) << "the lease is released";
}

TEST_F(StockOperator, LeftoverCordonUnderTheUpgradePolicyKeepsTheCordonAndDropsOurClaim) {
  Scenario s(cluster(), "stock-policy");
  s.deploy_operands(default_operands());
  s.wait_running(s.operator_ns(), default_operands().size());
  // A crashed run of ours cordoned the node; now the upgrade controller runs the upgrade (and owns cordons).
  kubectl_ok(cluster(), {"cordon", s.node()});
  s.annotate_node(kCordonAnnotation, "true");
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");

  auto r = s.run(sa_kubeconfig());

  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("the GPU Operator's upgrade policy is on and owns the cordon"));
  EXPECT_THAT(r.log, Not(HasSubstr("Uncordoning node")));
  EXPECT_TRUE(s.unschedulable()) << "the upgrade controller's cordon stays";
  EXPECT_FALSE(s.has_annotation(kCordonAnnotation));
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "true");
}

TEST_F(StockOperator, LeftoverCordonWithoutThePolicyIsAdoptedAndUndoneAtTheEnd) {
  Scenario s(cluster(), "stock-nopolicy");
  s.deploy_operands(default_operands());
  s.wait_running(s.operator_ns(), default_operands().size());
  kubectl_ok(cluster(), {"cordon", s.node()});
  s.annotate_node(kCordonAnnotation, "true");

  auto r = s.run(sa_kubeconfig());

  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("was cordoned by an earlier run of driver-manager"));
  EXPECT_FALSE(s.unschedulable());
  EXPECT_FALSE(s.has_annotation(kCordonAnnotation));
}

// SIGTERM while a request is retrying through an API outage: the request stops at once and the cleanup,
// bounded by the budget the pod's grace period sets, ends the run before the kubelet would kill it. The test
// does what the kubelet does: SIGTERM, then SIGKILL when the grace period has passed.
TEST_F(StockOperator, SigtermDuringAnApiOutageEndsTheRunWithinTheGracePeriod) {
  Scenario s(cluster(), "stock-outage");
  s.deploy_operands(default_operands());
  deploy_client(s, "agent");
  s.wait_running(s.operator_ns(), default_operands().size());
  s.wait_running(s.workload_ns(), 1);
  create_own_pod(s, "driver-pod", "  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule\n",
                 12);
  // Hold the run after the unload (MOFED wait) so the API server can be stopped before the restore.
  run_command({"mkdir", "-p", s.sim_path("/sys/bus/pci/devices/0000:3b:00.0")});
  run_command({"sh", "-c", "echo 0x15b3 > " + s.sim_path("/sys/bus/pci/devices/0000:3b:00.0/vendor")});
  const std::map<std::string, std::string> env = {
      {"POD_NAME", "driver-pod"}, {"POD_NAMESPACE", s.operator_ns()}, {"GPU_DIRECT_RDMA_ENABLED", "true"}};
  BackgroundProcess dm({bin_path("driver-manager"), "uninstall_driver"},
                       cluster().state_dir() + "/dm-stock-outage.log", s.env(sa_kubeconfig(), env));
  ASSERT_TRUE(wait_for_log(dm, "Waiting for MOFED to be installed")) << dm.log();
  EXPECT_THAT(dm.log(), HasSubstr("SIGTERM cleanup budget 7s"));

  cluster().stop_apiserver();
  run_command({"mkdir", "-p", s.sim_path("/run/mellanox/drivers")});
  run_command({"touch", s.sim_path("/run/mellanox/drivers/.driver-ready")});
  // The restore's first request is retrying against the stopped API server: the outage (logged when it
  // begins, maybe by the pod watch first, and every 15 s while it lasts) is still under way after the MOFED
  // wait, the last step before the restore.
  const bool retrying = eventually(
      [&] {
        const std::string log = dm.log();
        const auto ready = log.find("MOFED driver is ready");
        return ready != std::string::npos &&
               (log.find("The API server is not answering", ready) != std::string::npos ||
                log.find("The API server has not answered for", ready) != std::string::npos);
      },
      60);
  if (!retrying) cluster().start_apiserver();
  ASSERT_TRUE(retrying) << dm.log();

  dm.signal(SIGTERM);
  int code = dm.wait(12);  // the pod's terminationGracePeriodSeconds
  if (code == -1) {
    dm.signal(SIGKILL);
    code = dm.wait(30);
  }
  cluster().start_apiserver();
  EXPECT_EQ(code, 143) << "exited by itself within the grace period, not killed\n" << dm.log();
  const std::string log = dm.log();
  EXPECT_THAT(log, HasSubstr("Received SIGTERM: restoring the node before exiting"));
  EXPECT_THAT(log.substr(log.rfind('\n', log.size() - 2) + 1), HasSubstr("Summary: terminated by SIGTERM"));

  // Nothing could be restored with the API server away: the next run (the recreated pod) heals the node.
  auto r = s.run(sa_kubeconfig(), env);
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_TRUE(taints(s).empty()) << taints(s).dump();
  EXPECT_FALSE(s.has_annotation(kOwnerAnnotation));
  EXPECT_FALSE(s.unschedulable());
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "true");
  // Its DaemonSet brings the client back: the controller-manager's watches come back from the API
  // server's restart with their back-off, slower on a loaded machine than the usual minute.
  s.wait_running(s.workload_ns(), 1, {}, 180);
  // The next test's node must not wait on the controllers' back-off after the outage.
  cluster().restart_controllers();
}

TEST_F(StockOperator, TheStockDriverRoleMayNotWatchPodsSoTheRunListsThemInstead) {
  // The service account has exactly the GPU Operator's stock nvidia-driver ClusterRole of the releases
  // before v26.7: pods get and list, no watch.
  cluster().apply(read_file(source_path("tests/fixtures/e2e/clusterrole-nvidia-driver.yaml")));
  const std::string kubeconfig =
      cluster().service_account_kubeconfig(kSaNamespace, "stock-nvidia-driver", "e2e-nvidia-driver");
  const std::string user = std::string("system:serviceaccount:") + kSaNamespace + ":stock-nvidia-driver";
  Scenario s(cluster(), "stock-nowatch");
  s.deploy_operands(default_operands());
  deploy_client(s, "agent");
  s.wait_running(s.operator_ns(), default_operands().size());
  s.wait_running(s.workload_ns(), 1);
  const auto before = s.running_uids(s.workload_ns());
  const size_t from = cluster().audit_events().size();

  auto r = s.run(kubeconfig);

  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("may list but not watch the pods of node " + s.node() +
                               ": listing them every second instead"));
  EXPECT_THAT(r.log, Not(HasSubstr("Watching the pods of node"))) << "no warning for an expected refusal";
  // The waits still saw the operands and the client go: the labels are back and the client was replaced.
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "true");
  s.wait_running(s.workload_ns(), 1);
  for (const auto& uid : before) EXPECT_EQ(s.running_uids(s.workload_ns()).count(uid), 0U) << "client reset";
  size_t pod_lists = 0;
  size_t pod_watches = 0;
  for (const auto& e : requests_of(cluster(), user, from)) {
    if (e.value("stage", "") != "ResponseComplete") continue;
    const auto ref = e.value("objectRef", json::object());
    if (ref.value("resource", "") != "pods" || ref.contains("name")) continue;
    if (e.value("verb", "") == "list") ++pod_lists;
    if (e.value("verb", "") == "watch") ++pod_watches;
  }
  EXPECT_GE(pod_lists, 3U) << "the pod cache was refreshed by lists";
  EXPECT_EQ(pod_watches, 1U) << "the refused watch is not asked again";
}

// A watch refused once is tried again every 30 s while the run lists instead: granted meanwhile (a role fixed
// mid-run, or a refusal by an API server still loading its RBAC rules), the run watches again and says so.
TEST_F(StockOperator, AWatchGrantedDuringTheRunIsTakenBackFromListing) {
  cluster().apply(read_file(source_path("tests/fixtures/e2e/clusterrole-nvidia-driver.yaml")));
  const std::string kubeconfig =
      cluster().service_account_kubeconfig(kSaNamespace, "stock-rewatch", "e2e-nvidia-driver");
  Scenario s(cluster(), "stock-rewatch");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // keeps the run waiting until released
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = s.start(kubeconfig, make_temp_dir("stock-rewatch") + "/dm.log");
  ASSERT_TRUE(wait_for_log(*dm, "may list but not watch the pods of node stock-rewatch")) << dm->log();
  cluster().apply(
      std::string("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n") +
      "  name: stock-rewatch-pods-watch\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n" +
      "  verbs: [watch]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n" +
      "metadata:\n  name: stock-rewatch-pods-watch\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n" +
      "  kind: ClusterRole\n  name: stock-rewatch-pods-watch\nsubjects:\n- kind: ServiceAccount\n" +
      "  name: stock-rewatch\n  namespace: " + kSaNamespace + "\n");
  EXPECT_TRUE(
      wait_for_log(*dm, "Watching the pods of node stock-rewatch again: the watch is allowed now", 90))
      << dm->log();
  kubectl_ok(cluster(), {"-n", s.operator_ns(), "annotate", "pods", "-l", "app=nvidia-dcgm",
                         "node-sim/stuck-terminating-"});
  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  EXPECT_EQ(s.label(deploy_label("dcgm")), "true");
}

}  // namespace
}  // namespace dm::test::uninstall
