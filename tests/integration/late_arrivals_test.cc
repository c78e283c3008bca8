// GPU users that arrive late (docs/behaviour.md, Late arrivals), on a real control plane + node-sim: pods
// bound to the node after its cordon and taint (created with spec.nodeName set, as the scheduler binds a pod
// it chose before the cordon) are found by the fresh look before the unload and evicted; a controller that
// keeps placing pods ends in a clear error with the node restored; a pod bound after that look, which the
// refused unload names as a holder, is evicted and the unload tried again.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LateArrivals : public UninstallSuite {};

// A pod bound to the node directly (no scheduler: the cordon and the taint do not stop it), holding the
// GPU while it runs: a GPU workload (nvidia.com/gpu limit) or an annotated GPU client.
void bind_late_pod(const TestCluster& c, const Scenario& s, const std::string& name, bool client,
                   const std::string& terminate_after = "0.3") {
  json container = {{"name", "main"}, {"image", "example.com/late:1"}};
  if (!client) container["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  json ann = {{"node-sim/terminate-after-seconds", terminate_after}};
  if (client) ann[kClientAnnotation] = "true";
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", name}, {"namespace", s.workload_ns()}, {"annotations", ann}}},
                    {"spec",
                     {{"nodeName", s.node()},
                      {"terminationGracePeriodSeconds", 5},
                      {"containers", json::array({container})}}}};
  c.apply(pod.dump());
}

bool holds(Scenario& s, const std::string& name) {
  for (const auto& u : s.sim().users()) {
    if (u == s.workload_ns() + "/" + name) return true;
  }
  return false;
}

void expect_restored(const Scenario& s, const std::vector<Operand>& ops) {
  const auto st = s.state();
  EXPECT_FALSE(st.unschedulable);
  EXPECT_EQ(st.taints.size(), 0U) << st.taints.dump();
  for (const char* a : {kCordonedAnnotation, kTaintedAnnotation, kPausedLabelsAnnotation})
    EXPECT_EQ(st.annotations.count(a), 0U) << a;
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
}

// One operand held terminating keeps the run in its first phase (cordoned, tainted, the first GPU users
// gone) until the test releases it.
std::vector<Operand> operands_with_a_held_one() {
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  return ops;
}

void release_held_operand(const TestCluster& c, const Scenario& s) {
  kubectl_ok(
      c, {"-n", s.operator_ns(), "annotate", "pods", "-l", "app=nvidia-dcgm", "node-sim/stuck-terminating-"});
}

// The run has cordoned the node (and tainted it, when it had annotated clients to reset) and waits for the
// held operand.
void await_first_phase(const Scenario& s, BackgroundProcess& dm, bool tainted) {
  ASSERT_TRUE(wait_for_log(dm, "Still waiting for GPU operand pods to shut down")) << dm.log();
  ASSERT_TRUE(eventually([&] { return s.unschedulable() && (!tainted || !s.taints().empty()); })) << dm.log();
}

TEST_F(LateArrivals, AWorkloadAndAClientBoundAfterTheCordonAndTaintAreEvictedBeforeTheUnload) {
  Scenario s(cluster(), "late");
  const auto ops = operands_with_a_held_one();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.deploy_client({.name = "agent"});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);

  auto dm = s.start(sa_kubeconfig(), make_temp_dir("late") + "/dm.log", {{"DRAIN_USE_FORCE", "true"}});
  await_first_phase(s, *dm, /*tainted=*/true);
  bind_late_pod(cluster(), s, "late-trainer", /*client=*/false);
  bind_late_pod(cluster(), s, "late-agent", /*client=*/true);
  ASSERT_TRUE(eventually([&] { return holds(s, "late-trainer") && holds(s, "late-agent"); }, 60))
      << s.sim().log();
  release_held_operand(cluster(), s);

  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  const std::string log = dm->log();
  EXPECT_THAT(log,
              ::testing::ContainsRegex("level=warning msg=2 GPU pod\\(s\\) arrived late on node late: "));
  EXPECT_THAT(log, HasSubstr(s.workload_ns() + "/late-trainer (GPU workload)"));
  EXPECT_THAT(log, HasSubstr(s.workload_ns() + "/late-agent (GPU client)"));
  EXPECT_THAT(log, HasSubstr("the scheduler's caches lag behind"));
  EXPECT_THAT(log, HasSubstr("No more GPU pods arrived late on node late"));
  EXPECT_THAT(log, Not(HasSubstr("driver is in use")));
  EXPECT_LT(log.find("arrived late on node late"), log.find("Unloading NVIDIA driver kernel modules"));
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "unloaded";
  for (const auto& p : s.pods_in(s.workload_ns())) {
    EXPECT_NE(p["metadata"].value("name", "").rfind("late-", 0), 0U) << "evicted: " << p.dump();
  }
  expect_restored(s, ops);
}

TEST_F(LateArrivals, AControllerThatKeepsPlacingPodsEndsInAClearErrorWithTheNodeRestored) {
  Scenario s(cluster(), "late-loop");
  const auto ops = operands_with_a_held_one();
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = s.start(sa_kubeconfig(), make_temp_dir("late-loop") + "/dm.log", {{"DRAIN_USE_FORCE", "true"}});
  await_first_phase(s, *dm, /*tainted=*/false);
  // Something keeps two GPU pods bound to the node, binding a new one as soon as one is going (each takes
  // 2 s to terminate), as a controller that sets spec.nodeName itself would, while the run lasts.
  std::atomic<bool> stop{false};
  std::thread placer([&] {
    for (int i = 0; !stop;) {
      size_t live = 0;
      for (const auto& p : s.pods_in(s.workload_ns()))
        live += p["metadata"].contains("deletionTimestamp") ? 0 : 1;
      for (; live < 2; ++live) bind_late_pod(cluster(), s, "placed-" + std::to_string(i++), false, "2");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  ASSERT_TRUE(eventually([&] { return holds(s, "placed-0"); }, 60)) << s.sim().log();
  release_held_operand(cluster(), s);
  const int code = dm->wait(180);
  stop = true;
  placer.join();

  ASSERT_EQ(code, 1) << dm->log();
  const std::string log = dm->log();
  // Rounds with growing pauses between them (1 s, 2 s, 4 s, 8 s, 8 s ...) until 30 s have passed since the
  // first late pod was found: the fourth round starts about 13 s in, and is followed by the longest pause.
  EXPECT_THAT(log, HasSubstr("(round 4; pods still arriving 30s after the first late one fail the run)"));
  EXPECT_THAT(log, HasSubstr("Looking again for GPU pods on node late-loop in 1s"));
  EXPECT_THAT(log, HasSubstr("Looking again for GPU pods on node late-loop in 8s"));
  EXPECT_THAT(log,
              ::testing::ContainsRegex("level=fatal msg=GPU pods keep arriving on node late-loop after it "
                                       "was cordoned and tainted: evicted late arrivals [0-9]+ times in "
                                       "([3-9][0-9]|[1-9][0-9][0-9]+)s, and still "));
  EXPECT_THAT(log, HasSubstr("Something keeps placing GPU pods on the node"));
  EXPECT_THAT(log, Not(HasSubstr("Unloading NVIDIA driver kernel modules")));
  EXPECT_TRUE(s.sim().refcnt().has_value()) << "nothing was unloaded";
  expect_restored(s, ops);
}

TEST_F(LateArrivals, AHolderThatArrivedAfterTheLastLookIsFoundOnTheHostAndEvictedBeforeTheUnload) {
  // The DRA kubelet plugin's drain comes after the look for late arrivals: with the plugin held
  // terminating, a pod bound meanwhile is found by the host's holder scan right before the unload, and
  // evicted as a GPU workload; the unload then succeeds at the first try.
  Scenario s(cluster(), "late-holder");
  auto ops = default_operands();
  ops.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", false, /*stuck=*/true});
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = s.start(sa_kubeconfig(), make_temp_dir("late-holder") + "/dm.log", {{"DRAIN_USE_FORCE", "true"}});
  ASSERT_TRUE(wait_for_log(*dm, "Draining the DRA kubelet-plugin")) << dm->log();
  bind_late_pod(cluster(), s, "after-look", /*client=*/false);
  ASSERT_TRUE(eventually([&] { return holds(s, "after-look"); }, 60)) << s.sim().log();
  kubectl_ok(cluster(), {"-n", s.operator_ns(), "annotate", "pods", "-l",
                         "app=nvidia-dra-driver-kubelet-plugin", "node-sim/stuck-terminating-"});

  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  const std::string log = dm->log();
  EXPECT_THAT(log, Not(HasSubstr("driver is in use")));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       s.workload_ns() + "/after-look \\(pid [0-9]+ \\(gpu-workload\\)\\): found holding the "
                                         "GPU on the host, and no rule took it off: evicting it as a GPU "
                                         "workload"));
  EXPECT_THAT(log, HasSubstr("Successfully uninstalled nvidia driver components"));
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "unloaded";
  EXPECT_TRUE(s.pods_in(s.workload_ns(), "").empty()) << "the late pod was evicted";
  EXPECT_EQ(s.label(deploy_label("dra-driver")), "true");
}

TEST_F(LateArrivals, ADaemonSetsClientPutBackEarlyIsFoundOnTheHostAndResetAsAClient) {
  // A DaemonSet controller deciding from a node it has not seen tainted yet (after an API server restart)
  // puts an annotated client's pod back while the DRA plugin drains: the host's holder scan finds it, and
  // it is reset as the GPU client it is, not refused as a DaemonSet's pod.
  Scenario s(cluster(), "late-ds-holder");
  auto ops = default_operands();
  ops.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", false, /*stuck=*/true});
  s.deploy_operands(ops);
  s.deploy_client({.name = "agent"});  // a client to reset: the run taints the node
  s.deploy_client(
      {.name = "late-ds", .kind = "DaemonSet", .node_selector = {{"example.com/late-ds", "true"}}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  auto dm = s.start(sa_kubeconfig(), make_temp_dir("late-ds-holder") + "/dm.log");
  ASSERT_TRUE(wait_for_log(*dm, "Draining the DRA kubelet-plugin")) << dm->log();
  ASSERT_FALSE(s.taints().empty()) << dm->log();
  // The node now selects the DaemonSet, whose controller places nothing on the tainted node; the pod a
  // lagging controller would have made is made here, owned by the DaemonSet (which keeps it: NoSchedule
  // does not evict a running pod).
  kubectl_ok(cluster(), {"label", "node", s.node(), "example.com/late-ds=true"});
  const json ds = cluster().get_json({"-n", s.workload_ns(), "daemonset", "late-ds"});
  json pod = s.client_object({.name = "late-ds-early", .kind = "Pod"});
  pod["metadata"]["labels"] = {{"app", "late-ds"}};
  pod["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "apps/v1"},
                                                     {"kind", "DaemonSet"},
                                                     {"name", "late-ds"},
                                                     {"uid", ds["metadata"]["uid"]},
                                                     {"controller", true},
                                                     {"blockOwnerDeletion", true}}});
  pod["spec"].erase("nodeSelector");
  pod["spec"]["nodeName"] = s.node();
  cluster().apply(pod.dump());
  ASSERT_TRUE(eventually([&] { return holds(s, "late-ds-early"); }, 60)) << s.sim().log();
  kubectl_ok(cluster(), {"-n", s.operator_ns(), "annotate", "pods", "-l",
                         "app=nvidia-dra-driver-kubelet-plugin", "node-sim/stuck-terminating-"});

  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  const std::string log = dm->log();
  EXPECT_THAT(log, ::testing::ContainsRegex(s.workload_ns() +
                                            "/late-ds-early \\(pid [0-9]+ \\([^)]*\\)\\): found holding "
                                            "the GPU on the host: resetting it as a GPU client"));
  EXPECT_THAT(log, Not(HasSubstr("cannot be evicted")));
  EXPECT_THAT(log, Not(HasSubstr("driver is in use")));
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "unloaded";
  for (const auto& p : s.pods_in(s.workload_ns(), "app=late-ds"))
    EXPECT_NE(p["metadata"].value("name", ""), "late-ds-early") << "reset";
  expect_restored(s, ops);
}

// With GPU workload eviction off, a workload bound late is not evicted: the unload is refused naming it, as
// for any workload the run may not evict, and the node is restored.
TEST_F(LateArrivals, WithEvictionOffALateWorkloadIsLeftAndTheUnloadIsRefusedNamingIt) {
  Scenario s(cluster(), "late-off");
  const auto ops = operands_with_a_held_one();
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = s.start(sa_kubeconfig(), make_temp_dir("late-off") + "/dm.log",
                    {{"DRAIN_USE_FORCE", "true"}, {"ENABLE_GPU_POD_EVICTION", "false"}});
  ASSERT_TRUE(wait_for_log(*dm, "Still waiting for GPU operand pods to shut down")) << dm->log();
  bind_late_pod(cluster(), s, "late-kept", /*client=*/false);
  ASSERT_TRUE(eventually([&] { return holds(s, "late-kept"); }, 60)) << s.sim().log();
  release_held_operand(cluster(), s);

  ASSERT_EQ(dm->wait(120), 1) << dm->log();
  const std::string log = dm->log();
  EXPECT_THAT(log, HasSubstr("No GPU pods arrived late on node late-off"));
  EXPECT_THAT(log, Not(HasSubstr("evicting pod " + s.workload_ns() + "/late-kept")));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       "level=fatal msg=failed to unload NVIDIA driver kernel modules: .*in pod " +
                       s.workload_ns() + "/late-kept"));
  EXPECT_EQ(s.running_uids(s.workload_ns()).size(), 1U);
  expect_restored(s, ops);
}

}  // namespace
}  // namespace dm::test::uninstall
