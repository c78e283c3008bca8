// Reliability on a real control plane + node-sim: a run killed in the middle and rerun at once (as the
// kubelet restarts a crashed init container) heals without letting clients back in; two overlapping runs
// do not heal each other; an operand label changed during a run is not overwritten by its restore; a
// malformed client annotation is a warning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class Reliability : public UninstallSuite {
 protected:
  // An annotated DaemonSet client that holds the GPU (recreated the moment a taint stops keeping it off).
  static void deploy_daemonset_client(const Scenario& s, const std::string& name,
                                      const std::string& gpu_client = "true", bool holds_gpu = true) {
    s.deploy_client({.name = name,
                     .kind = "DaemonSet",
                     .gpu_client = gpu_client,
                     .terminate_after = "0.3",
                     .holds_gpu = holds_gpu,
                     .grace_period_seconds = 5});
  }
  static std::unique_ptr<BackgroundProcess> start(const Scenario& s, const std::string& log_name,
                                                  const std::map<std::string, std::string>& extra) {
    return s.start(sa_kubeconfig(), cluster().state_dir() + "/" + log_name + ".log", extra);
  }
  static bool wait_log(BackgroundProcess& p, const std::string& needle, double timeout_s = 90) {
    return wait_for_log(p, needle, timeout_s);
  }
};

// SIGKILL while the GPU workloads are being evicted (the gpu-client taint is on: the client's eviction, which
// runs beside, was sent after it), then an immediate rerun of the same pod: the rerun keeps the taint on
// until the driver is unloaded, so the DaemonSet client cannot grab the GPU in between. Repeated: it must
// pass every time.
TEST_F(Reliability, SigkillDuringWorkloadEvictionThenAnImmediateRerunHeals) {
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    Scenario s(cluster(), "crash-" + std::to_string(i));
    const auto ops = default_operands();
    s.deploy_operands(ops);
    deploy_daemonset_client(s, "node-agent");
    s.deploy_gpu_workload("train");
    s.wait_running(s.operator_ns(), ops.size());
    s.wait_running(s.workload_ns(), 2);
    // Slow the workload's termination so the kill lands inside the eviction wait.
    kubectl_ok(cluster(), {"-n", s.workload_ns(), "annotate", "pods", "-l", "app=train", "--overwrite",
                           "node-sim/terminate-after-seconds=4"});
    const std::map<std::string, std::string> env = {
        {"POD_NAME", "nvidia-driver-daemonset-x" + std::to_string(i)}};

    auto first = start(s, "crash-first-" + std::to_string(i), env);
    ASSERT_TRUE(wait_log(*first, "evicting pod " + s.workload_ns() + "/train-")) << first->log();
    ASSERT_TRUE(wait_log(*first, "evicting pod " + s.workload_ns() + "/node-agent-")) << first->log();
    first->signal(SIGKILL);
    first->wait(10);
    ASSERT_TRUE(s.has_annotation(kTaintedAnnotation)) << "the killed run left its taint";

    auto rerun = s.run(sa_kubeconfig(), env);
    EXPECT_EQ(rerun.exit_code, 0) << rerun.log;
    EXPECT_THAT(rerun.log, HasSubstr("Taking over the lease on node " + s.node()));
    EXPECT_THAT(rerun.log, HasSubstr("keeping it on until the driver is unloaded"));
    EXPECT_THAT(rerun.log, Not(HasSubstr("driver is in use")));
    EXPECT_FALSE(s.sim().refcnt().has_value()) << "unloaded";
    EXPECT_FALSE(s.has_annotation(kTaintedAnnotation));
    EXPECT_FALSE(s.has_annotation(kLeaseAnnotation));
    EXPECT_FALSE(s.unschedulable());
    for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
    if (HasFailure()) break;
  }
}

// A second run started while the first one holds the node waits for it instead of taking the first run's
// taint, cordon and paused labels for a crash's leftovers, then does its own run.
TEST_F(Reliability, ASecondRunWaitsForTheFirstInsteadOfHealingIt) {
  Scenario s(cluster(), "overlap");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  deploy_daemonset_client(s, "node-agent");
  s.deploy_gpu_workload("train");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  kubectl_ok(cluster(), {"-n", s.workload_ns(), "annotate", "pods", "-l", "app=train", "--overwrite",
                         "node-sim/terminate-after-seconds=6"});

  auto first = start(s, "overlap-first", {});
  ASSERT_TRUE(wait_log(*first, "evicting pod " + s.workload_ns() + "/train-")) << first->log();
  auto second = start(s, "overlap-second", {});
  ASSERT_TRUE(wait_log(*second, "Waiting for the run of driver-manager that holds node " + s.node()))
      << second->log();
  EXPECT_EQ(first->wait(120), 0) << first->log();
  // The second run then finds no driver loaded (the first one unloaded it) and prepares the node again.
  EXPECT_EQ(second->wait(120), 0) << second->log();
  EXPECT_THAT(second->log(), Not(HasSubstr("left by an earlier run")));
  EXPECT_THAT(first->log(), Not(HasSubstr("Lost the lease")));
  EXPECT_FALSE(s.has_annotation(kLeaseAnnotation));
  EXPECT_FALSE(s.has_annotation(kTaintedAnnotation));
  EXPECT_FALSE(s.unschedulable());
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
}

// An operand label the operator or an admin changes while it is paused is theirs: the restore leaves it.
TEST_F(Reliability, ALabelChangedDuringTheRunIsNotOverwrittenByTheRestore) {
  Scenario s(cluster(), "relabel");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // holds the run in the operand wait
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = start(s, "relabel", {{"OPERAND_WAIT_TIMEOUT", "300s"}});
  ASSERT_TRUE(wait_log(*dm, "Still waiting for GPU operand pods")) << dm->log();
  ASSERT_EQ(s.label(deploy_label("dcgm-exporter")), "paused-for-driver-upgrade");
  s.label_node({{deploy_label("dcgm-exporter"), "false"}});
  // Let the stuck operand go so the run completes.
  kubectl_ok(cluster(), {"-n", s.operator_ns(), "delete", "pods", "-l", "app=nvidia-dcgm", "--force",
                         "--grace-period=0"});
  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  EXPECT_THAT(dm->log(), HasSubstr("Not restoring node label \"" + deploy_label("dcgm-exporter") +
                                   "\": it was changed to \"false\" during the run by someone else"));
  EXPECT_EQ(s.label(deploy_label("dcgm-exporter")), "false");
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "true");
  EXPECT_EQ(s.label(deploy_label("dcgm")), "true");
}

// A client annotation that is not a boolean is a warning at discovery, naming the accepted values.
TEST_F(Reliability, AMalformedClientAnnotationIsAWarning) {
  Scenario s(cluster(), "badann");
  deploy_daemonset_client(s, "typo-agent", "yes", /*holds_gpu=*/false);
  s.wait_running(s.workload_ns(), 1);
  auto r = s.run(sa_kubeconfig());
  EXPECT_EQ(r.exit_code, 0) << r.log;
  std::string line;
  std::istringstream in(r.log);
  for (std::string l; std::getline(in, l);) {
    if (l.find("is not a boolean") != std::string::npos) line = l;
  }
  EXPECT_THAT(line, HasSubstr("level=warning")) << r.log;
  EXPECT_THAT(line, HasSubstr("typo-agent"));
  EXPECT_THAT(line, HasSubstr("accepted: true, false"));
}

}  // namespace
}  // namespace dm::test::uninstall
