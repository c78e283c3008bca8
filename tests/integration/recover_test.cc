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

constexpr const char* kLease = kLeaseAnnotation;
constexpr const char* kTainted = kTaintedAnnotation;
constexpr const char* kCordoned = kCordonedAnnotation;
constexpr const char* kPausedLabels = kPausedLabelsAnnotation;
constexpr const char* kPaused = kPausedValue;

class Recover : public UninstallSuite {
 protected:
  static std::unique_ptr<BackgroundProcess> start(const Scenario& s, const std::string& log_name,
                                                  const std::map<std::string, std::string>& extra = {}) {
    return s.start(sa_kubeconfig(), cluster().state_dir() + "/" + log_name + ".log", extra);
  }
  // Kills the run once `pred` holds on the node.
  static void kill_when(BackgroundProcess& p, const std::function<bool()>& pred) {
    ASSERT_TRUE(eventually(pred, 90)) << p.log();
    p.signal(SIGKILL);
    p.wait(10);
  }
  static DmRun recover(const Scenario& s, bool force) { return s.recover(sa_kubeconfig(), force); }
  static void deploy_daemonset_client(const Scenario& s, const std::string& name) {
    s.deploy_client({.name = name,
                     .kind = "DaemonSet",
                     .terminate_after = "30",
                     .holds_gpu = true,
                     .grace_period_seconds = 60});
  }
  static std::vector<std::string> taint_keys(const Scenario& s) {
    std::vector<std::string> out;
    for (const auto& t : s.taints()) out.push_back(t.value("key", "") + ":" + t.value("effect", ""));
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
