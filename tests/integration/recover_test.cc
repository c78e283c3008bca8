// `driver-manager recover` on a real control plane + node-sim: a run SIGKILLed after the pause, after the
// taint and after the cordon leaves the node changed; recover puts back exactly what that run changed (its
// taint, cordon, recorded labels and lease) and leaves an admin's cordon, labels and taints alone. It refuses
// while the killed run's lease is still live, unless --force.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

constexpr const char* kLease = "nvidia.com/gpu-driver-manager.lease";
constexpr const char* kTainted = "nvidia.com/gpu-driver-manager.tainted";
constexpr const char* kCordoned = "nvidia.com/gpu-driver-manager.cordoned";
constexpr const char* kPausedLabels = "nvidia.com/gpu-driver-manager.paused-labels";
constexpr const char* kPaused = "paused-for-driver-upgrade";

class Recover : public UninstallSuite {
 protected:
  static std::unique_ptr<BackgroundProcess> start(const Scenario& s, const std::string& log_name,
                                                  const std::map<std::string, std::string>& extra = {}) {
    return std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin_path("driver-manager"), "uninstall_driver"},
        cluster().state_dir() + "/" + log_name + ".log", s.env(sa_kubeconfig(), extra));
  }
  // Kills the run once `pred` holds on the node.
  static void kill_when(BackgroundProcess& p, const std::function<bool()>& pred) {
    ASSERT_TRUE(eventually(pred, 90)) << p.log();
    p.signal(SIGKILL);
    p.wait(10);
  }
  // recover as an operator runs it from a laptop: only --node-name and a kubeconfig, nothing else set.
  static DmRun recover(const Scenario& s, bool force) {
    std::vector<std::string> argv = {bin_path("driver-manager"), "recover", "--node-name", s.node()};
    if (force) argv.emplace_back("--force");
    auto out = run_command(argv, {}, {{"KUBECONFIG", sa_kubeconfig()}});
    return {out.exit_code, out.out + out.err};
  }
  static void deploy_daemonset_client(const Scenario& s, const std::string& name) {
    cluster().apply("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: " + name + "\n  namespace: " +
                    s.workload_ns() + "\nspec:\n  selector:\n    matchLabels:\n      app: " + name +
                    "\n  template:\n    metadata:\n      labels:\n        app: " + name +
                    "\n      annotations:\n        nvidia.com/gpu.client: \"true\"\n"
                    "        node-sim/holds-gpu: \"true\"\n        node-sim/terminate-after-seconds: \"30\"\n"
                    "    spec:\n      terminationGracePeriodSeconds: 60\n      nodeSelector:\n        " +
                    std::string(kNodeLabel) + ": " + s.node() +
                    "\n      containers:\n      - name: main\n        image: example.com/gpu-agent:1\n");
  }
  static std::vector<std::string> taint_keys(const Scenario& s) {
    std::vector<std::string> out;
    const auto n = s.node_json();
    if (n["spec"].contains("taints")) {
      for (const auto& t : n["spec"]["taints"])
        out.push_back(t.value("key", "") + ":" + t.value("effect", ""));
    }
    return out;
  }
  static void expect_no_trace_of_us(const Scenario& s) {
    for (const char* a : {kLease, kTainted, kCordoned, kPausedLabels}) EXPECT_FALSE(s.has_annotation(a)) << a;
  }
};

// Killed while waiting for the operands to go (labels paused and recorded): recover refuses while the lease
// of the killed run is live, then with --force restores the labels.
TEST_F(Recover, AfterThePauseRestoresTheRecordedLabelsAndRefusesWhileTheLeaseIsLive) {
  Scenario s(cluster(), "rec-pause");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // holds the run in the operand wait
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = start(s, "rec-pause", {{"OPERAND_WAIT_TIMEOUT", "300s"}});
  kill_when(*dm, [&] { return s.has_annotation(kPausedLabels) && s.label(deploy_label("dcgm")) == kPaused; });
  ASSERT_TRUE(s.has_annotation(kLease));

  auto refused = recover(s, /*force=*/false);
  EXPECT_EQ(refused.exit_code, 1) << refused.log;
  EXPECT_THAT(refused.log, HasSubstr("is held by a run of driver-manager in progress"));
  EXPECT_THAT(refused.log, HasSubstr("--force"));
  EXPECT_EQ(s.label(deploy_label("dcgm")), kPaused) << "a refused recover changes nothing";
  EXPECT_TRUE(s.has_annotation(kPausedLabels));

  auto r = recover(s, /*force=*/true);
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Recovered node " + s.node()));
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  expect_no_trace_of_us(s);

  // Nothing left: a second recover says so and changes nothing.
  auto again = recover(s, false);
  EXPECT_EQ(again.exit_code, 0) << again.log;
  EXPECT_THAT(again.log, HasSubstr("Nothing to recover on node " + s.node()));
}

// Killed after the gpu-client taint (while the annotated client is being reset) on a node an admin had
// cordoned and tainted: recover removes our taint and labels, keeps the admin's cordon and taint.
TEST_F(Recover, AfterTheTaintKeepsTheAdminsCordonAndTaint) {
  Scenario s(cluster(), "rec-taint");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  deploy_daemonset_client(s, "node-agent");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  kubectl_ok(cluster(), {"cordon", s.node()});
  kubectl_ok(cluster(), {"taint", "node", s.node(), "example.com/maintenance=admin:NoExecute"});

  auto dm = start(s, "rec-taint");
  kill_when(*dm, [&] { return s.has_annotation(kTainted); });
  ASSERT_THAT(taint_keys(s), ::testing::Contains("nvidia.com/gpu:NoSchedule"));

  auto r = recover(s, /*force=*/true);
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("removed taint nvidia.com/gpu:NoSchedule"));
  EXPECT_THAT(r.log, HasSubstr("cordon (not made by driver-manager)"));
  EXPECT_THAT(taint_keys(s), ::testing::ElementsAre("example.com/maintenance:NoExecute"));
  EXPECT_TRUE(s.unschedulable()) << "the admin's cordon stays";
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  expect_no_trace_of_us(s);
}

// Killed while evicting the GPU workloads (labels paused, node cordoned by us); meanwhile an admin
// switched one paused operand off and set another operand label to a paused-looking value. recover undoes
// our changes and leaves both labels of the admin.
TEST_F(Recover, AfterTheCordonUndoesOurChangesAndLeavesTheAdminsLabels) {
  Scenario s(cluster(), "rec-cordon");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("train");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  kubectl_ok(cluster(), {"-n", s.workload_ns(), "annotate", "pods", "-l", "app=train", "--overwrite",
                         "node-sim/terminate-after-seconds=60"});

  auto dm = start(s, "rec-cordon");
  kill_when(*dm, [&] { return s.has_annotation(kCordoned); });
  ASSERT_TRUE(s.unschedulable());
  ASSERT_TRUE(s.has_annotation(kPausedLabels));
  s.label_node({{deploy_label("device-plugin"), "false"}, {deploy_label("sandbox-validator"), kPaused}});

  auto r = recover(s, /*force=*/true);
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("uncordoned"));
  EXPECT_THAT(r.log,
              HasSubstr("label " + deploy_label("device-plugin") + "=false (changed by someone else)"));
  EXPECT_FALSE(s.unschedulable());
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "false");
  EXPECT_EQ(s.label(deploy_label("sandbox-validator")), kPaused) << "not ours: no record of it";
  for (const auto& op : ops) {
    if (op.label == "device-plugin") continue;
    EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  }
  expect_no_trace_of_us(s);
}

}  // namespace
}  // namespace dm::test::uninstall
