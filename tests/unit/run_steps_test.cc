// The steps that need the run's services (manager/commands/run_steps.h), each run alone on a test::Bench
// (support/step_bench.h) with services and a run context of the test's own: no Uninstall, no other step.
#include "manager/commands/run_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kube/api.h"
#include "manager/commands/step_def.h"
#include "manager/pods/late_arrivals.h"
#include "manager/rules/node_keys.h"
#include "support/step_bench.h"

namespace dm::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A bench with what the run hands a step besides its environment: the path's facts, the undo list, the
// progress, the phases it opens (recorded), and the late-arrival looks the run makes before its first step.
struct RunBench : test::Bench {
  explicit RunBench(bool evict_workloads = true, bool auto_drain = false) : progress(clock) {
    flow.path = RunPath::kFull;
    flow.evict_workloads = evict_workloads;
    flow.facts.auto_drain = auto_drain;
    run.late.emplace(ctx, clients, evict_workloads, TakenBeside{});
    host.loaded.insert("nvidia");
  }
  // A running pod of n1 in "work" owned by ReplicaSet rs (a workload the eviction may take), gone at once
  // when evicted (grace 0: no kubelet stand-in needed). Returns its UID.
  std::string add_workload(const std::string& name, bool gpu) {
    nlohmann::json spec = {{"terminationGracePeriodSeconds", 0}};
    if (gpu) {
      spec["containers"] = nlohmann::json::array(
          {{{"name", "main"}, {"image", "app:1"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}});
    }
    add_pod(name, spec);
    auto pod = cluster.get(kube::paths::pod("work", name));
    EXPECT_TRUE(pod);
    (*pod)["metadata"]["ownerReferences"] = nlohmann::json::array({{{"apiVersion", "apps/v1"},
                                                                    {"kind", "ReplicaSet"},
                                                                    {"name", "rs"},
                                                                    {"uid", "rs-uid"},
                                                                    {"controller", true}}});
    cluster.apply(*pod);
    return (*pod)["metadata"].value("uid", "");
  }
  FlowSteps flow;
  RunProgress progress;
  std::vector<Phase> entered;
  // The node's labels as the lease found them: the snapshot the label steps work from.
  void label_node(const nlohmann::json& labels) {
    auto n = cluster.get(kube::paths::node("n1"));
    ASSERT_TRUE(n);
    (*n)["metadata"]["labels"] = labels;
    cluster.apply(*n);
    snapshot = take_snapshot(*cluster.get(kube::paths::node("n1")), operands);
    labels_of_run.start_from(*cluster.get(kube::paths::node("n1")));
  }
  [[nodiscard]] nlohmann::json node_labels() {
    auto n = cluster.get(kube::paths::node("n1"));
    EXPECT_TRUE(n);
    return n ? (*n)["metadata"].value("labels", nlohmann::json::object()) : nlohmann::json::object();
  }
  std::vector<OperandSpec> operands = operand_table();
  Snapshot snapshot;
  OperandLabels labels_of_run{settings, snapshot, operands};
  std::vector<nlohmann::json> paused;  // what the run's label write was asked to pause
  RunServices services{.flow = flow,
                       .undo = undo,
                       .progress = progress,
                       .labels = labels_of_run,
                       // The run's label write without the lease: the labels and their record, one patch.
                       .pause_labels =
                           [this](const nlohmann::json& labels, FirstWrite&) {
                             paused.push_back(labels);
                             labels_of_run.record_pause(labels);
                             return node.update_labels(labels, {{std::string(kPausedLabelsAnnotation),
                                                                 labels_of_run.record_value()}});
                           },
                       .undo_changes =
                           [this] {
                             ++restores;
                             return ok_status();
                           },
                       .enter = [this](Phase p) { entered.push_back(p); }};
  int restores = 0;  // the run's restore, as undo-changes asks for it
  // Runs `step` through its row, as the run does (without the run's cancellation check and phase).
  Status run_step(Step step) {
    StepCall call{env, run, services};
    return step_def(step).run(call);
  }
  RunContext run;
};

TEST(PauseOperandsStep, TheOperandLabelsArePausedAfterTheirRestoreIsRegistered) {
  RunBench b;
  b.label_node({{"nvidia.com/gpu.deploy.device-plugin", "true"}, {"nvidia.com/gpu.deploy.dcgm", "true"}});
  b.watch_pods();
  ASSERT_TRUE(pause_operands(b.env, b.services, b.run));
  ASSERT_EQ(b.paused.size(), 1U);
  EXPECT_EQ(b.node_labels().value("nvidia.com/gpu.deploy.device-plugin", ""), "paused-for-driver-upgrade");
  EXPECT_EQ(b.node_labels().value("nvidia.com/gpu.deploy.dcgm", ""), "paused-for-driver-upgrade");
  ASSERT_FALSE(b.undo.empty()) << "the restore is registered";
  // The run's undo puts them back, and the record with them.
  ASSERT_TRUE(b.undo.run_all({b.node, b.taint}, b.cancel));
  EXPECT_EQ(b.node_labels().value("nvidia.com/gpu.deploy.device-plugin", ""), "true");
  EXPECT_EQ(b.node_labels().value("nvidia.com/gpu.deploy.dcgm", ""), "true");
  auto n = b.cluster.get(kube::paths::node("n1"));
  ASSERT_TRUE(n);
  EXPECT_FALSE((*n)["metadata"]
                   .value("annotations", nlohmann::json::object())
                   .contains(std::string(kPausedLabelsAnnotation)))
      << n->dump();
}

TEST(PauseOperandsStep, WithNoOperandLabelNothingIsWrittenOrRegistered) {
  RunBench b;
  b.label_node({{"kubernetes.io/hostname", "n1"}});
  b.watch_pods();
  ASSERT_TRUE(pause_operands(b.env, b.services, b.run));
  EXPECT_THAT(b.paused, IsEmpty());
  EXPECT_TRUE(b.undo.empty());
}

TEST(PauseDraPluginStep, TheDraPluginLabelIsPausedAndItsPodsWaitedFor) {
  RunBench b;
  b.label_node({{"nvidia.com/gpu.deploy.dra-driver", "true"}});
  b.watch_pods();
  ASSERT_TRUE(pause_dra_plugin(b.env, b.services, b.run));
  ASSERT_EQ(b.paused.size(), 1U);
  EXPECT_EQ(b.node_labels().value("nvidia.com/gpu.deploy.dra-driver", ""), "paused-for-driver-upgrade");
  EXPECT_FALSE(b.undo.empty());
  EXPECT_THAT(b.log.text(),
              HasSubstr("Draining the DRA kubelet-plugin (last, after its claim-holding clients)"));
}

TEST(RestoreLabelsStep, LabelsAnEarlierRunLeftPausedArePutBack) {
  RunBench b;
  b.label_node({{"nvidia.com/gpu.deploy.device-plugin", "paused-for-driver-upgrade"}});
  auto n = b.cluster.get(kube::paths::node("n1"));
  ASSERT_TRUE(n);
  (*n)["metadata"]["annotations"][std::string(kPausedLabelsAnnotation)] =
      R"({"nvidia.com/gpu.deploy.device-plugin":"true"})";
  b.cluster.apply(*n);
  b.label_node(b.node_labels());  // the run starts from the node with the crashed run's record
  ASSERT_TRUE(restore_labels(b.env, b.services));
  EXPECT_EQ(b.node_labels().value("nvidia.com/gpu.deploy.device-plugin", ""), "true");
  EXPECT_THAT(b.log.text(), HasSubstr(kLabelRestoreLine));
}

bool unschedulable(test::Bench& b) {
  auto n = b.cluster.get(kube::paths::node("n1"));
  EXPECT_TRUE(n);
  return n && n->contains("spec") && (*n)["spec"].value("unschedulable", false);
}

TEST(TakeGpuUsersOffStep, TheNodeIsCordonedAndItsGpuWorkloadsEvicted) {
  RunBench b;
  const std::string uid = b.add_workload("trainer", /*gpu=*/true);
  b.add_pod("web");
  b.watch_pods();
  ASSERT_TRUE(take_gpu_users_off(b.env, b.services, b.run));
  EXPECT_TRUE(unschedulable(b));
  EXPECT_FALSE(b.undo.empty()) << "the cordon registered its undo";
  EXPECT_FALSE(b.cluster.get(kube::paths::pod("work", "trainer")));
  EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "web"))) << "no GPU: not a workload to evict";
  EXPECT_THAT(b.run.evicted.workloads, ElementsAre(uid));
  EXPECT_EQ(b.run.workload_eviction, WorkloadEviction::kDone);
}

TEST(TakeGpuUsersOffStep, WithoutWorkloadEvictionNothingIsCordonedOrEvicted) {
  RunBench b(/*evict_workloads=*/false);
  b.add_workload("trainer", /*gpu=*/true);
  b.watch_pods();
  ASSERT_TRUE(take_gpu_users_off(b.env, b.services, b.run));
  EXPECT_FALSE(unschedulable(b));
  EXPECT_TRUE(b.undo.empty());
  EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "trainer")));
}

TEST(TakeGpuUsersOffStep, ARefusedEvictionFailsTheStepOrHandsTheDrainOnWithAutoDrain) {
  for (const bool auto_drain : {false, true}) {
    SCOPED_TRACE(auto_drain ? "auto drain on" : "auto drain off");
    RunBench b(/*evict_workloads=*/true, auto_drain);
    // No controller and no DRAIN_USE_FORCE: the eviction may not take it.
    b.add_pod("bare", {{"containers",
                        nlohmann::json::array({{{"name", "main"},
                                                {"image", "app:1"},
                                                {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}});
    b.watch_pods();
    auto s = take_gpu_users_off(b.env, b.services, b.run);
    EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "bare")));
    if (auto_drain) {
      EXPECT_TRUE(s) << s.error().message;
      EXPECT_EQ(b.run.workload_eviction, WorkloadEviction::kDrainPending);
    } else {
      ASSERT_FALSE(s);
      EXPECT_THAT(s.error().message,
                  HasSubstr("cannot proceed until all GPU pods are drained from the node"));
      EXPECT_EQ(b.run.workload_eviction, WorkloadEviction::kDone);
    }
    EXPECT_TRUE(unschedulable(b)) << "cordoned before the eviction, undone by the run's restore";
  }
}

// A step runs alone through its row: a body needs no declaration of its own to be tested.
TEST(StepRows, EachRowRunsItsStepsBodyAlone) {
  RunBench b;
  b.settings.vfio_manage = "/opt/vfio-manage";
  ASSERT_TRUE(b.run_step(Step::kUnbindVfio));
  EXPECT_THAT(b.host.calls, ElementsAre("run /opt/vfio-manage unbind --all"));
  ASSERT_TRUE(b.run_step(Step::kUndoChanges));
  EXPECT_EQ(b.restores, 1) << "undo-changes is the run's restore";
  b.label_node({{"nvidia.com/gpu.deploy.dcgm", "paused-for-driver-upgrade"}});
  ASSERT_TRUE(b.run_step(Step::kRestoreLabels));
  EXPECT_THAT(b.log.text(), HasSubstr(kLabelRestoreLine));
}

TEST(UnloadDriverStep, WithoutTheDriverLoadedOnlyTheStaleRootGoes) {
  RunBench b;
  b.host.loaded.clear();
  ASSERT_TRUE(unload_driver(b.env, b.services, b.run));
  EXPECT_THAT(b.host.calls, ElementsAre("unmount", "remove-pid"));
}

TEST(UnloadDriverStep, AProcessOutsideAnyPodFailsTheRunBeforeAnyUnload) {
  RunBench b;
  b.watch_pods();
  b.host.holders = {{.pid = 4242, .comm = "nvidia-smi", .pod_uid = "", .modules = {"nvidia"}}};
  auto s = unload_driver(b.env, b.services, b.run);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("held on node n1 outside any pod by pid 4242 (nvidia-smi)"));
  EXPECT_THAT(b.host.calls, IsEmpty()) << "nothing unloaded, nothing unmounted";
}

// How many times `part` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// A host tool that was closing its device files as the host's look came: it is looked at again, each look
// logged, and once it has let go (3 s later, within the host-holder patience) the unload goes on.
TEST(UnloadDriverStep, AHostProcessThatLetsGoWithinThePatienceIsWaitedForAndTheUnloadCompletes) {
  RunBench b;
  b.watch_pods();
  const TimePoint start = b.clock.now();
  const host::HolderProcess smi{.pid = 4242, .comm = "nvidia-smi", .pod_uid = "", .modules = {"nvidia"}};
  b.host.holders_now = [&b, start, smi] {
    return b.clock.now() - start < std::chrono::seconds(3) ? std::vector<host::HolderProcess>{smi}
                                                           : std::vector<host::HolderProcess>{};
  };
  const auto s = unload_driver(b.env, b.services, b.run);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_THAT(b.host.calls, ElementsAre("unload-nvidia", "unmount", "remove-pid"));
  const std::string log = b.log.text();
  EXPECT_EQ(
      occurrences(log, "waiting for host process pid 4242 (nvidia-smi) to close the NVIDIA device files"), 2U)
      << "the looks at 0 s and 1 s found it, the one at 3 s did not\n"
      << log;
  EXPECT_THAT(log,
              HasSubstr("info The NVIDIA driver is held on node n1 outside any pod: waiting for host "
                        "process pid 4242 (nvidia-smi) to close the NVIDIA device files (look 1; looking "
                        "again in 1s, for at most 10s after the first look)"));
  EXPECT_EQ(b.clock.now() - start, std::chrono::seconds(3)) << "no longer than it held the driver";
  EXPECT_THAT(log, HasSubstr("info Successfully uninstalled nvidia driver components"));
}

// A host process that keeps the driver through the patience fails the run as before, naming it, after a
// bounded number of looks; nothing is unloaded or unmounted, and no pod holding it too is evicted.
TEST(UnloadDriverStep, AHostProcessThatStaysPastThePatienceFailsTheRunNamingItWithNothingUnloaded) {
  RunBench b;
  const std::string uid = b.add_workload("stray", /*gpu=*/false);
  b.watch_pods();
  const TimePoint start = b.clock.now();
  b.host.holders = {{.pid = 7, .comm = "python3", .pod_uid = uid, .modules = {"nvidia"}},
                    {.pid = 4242, .comm = "nv-hostengine", .pod_uid = "", .modules = {"nvidia"}}};
  auto s = unload_driver(b.env, b.services, b.run);
  ASSERT_FALSE(s);
  EXPECT_EQ(
      s.error().message,
      "the NVIDIA driver is held on node n1 outside any pod by pid 4242 (nv-hostengine): no eviction can "
      "end it. Stop it on the host (a service such as nvidia-persistenced or a monitoring agent, or a "
      "process started by hand), then run driver-manager again; nothing was unloaded");
  EXPECT_THAT(b.host.calls, IsEmpty()) << "nothing unloaded, nothing unmounted";
  EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "stray"))) << "no eviction for a run that fails";
  EXPECT_THAT(b.run.evicted.workloads, IsEmpty());
  EXPECT_EQ(b.clock.now() - start, kHostHolderPatience);
  EXPECT_EQ(b.clock.sleeps(), 4) << "looks at 0, 1, 3, 7 and 10 s";
  EXPECT_EQ(occurrences(b.log.text(),
                        "waiting for host process pid 4242 (nv-hostengine) to close the NVIDIA "
                        "device files"),
            4U);
}

// SIGTERM while waiting for a host process ends the wait at once.
TEST(UnloadDriverStep, SigtermWhileWaitingForAHostProcessEndsTheStep) {
  RunBench b;
  b.watch_pods();
  b.host.holders = {{.pid = 4242, .comm = "nvidia-smi", .pod_uid = "", .modules = {"nvidia"}}};
  b.clock.on_sleep = [&b](int) { b.cancel.cancel(); };  // SIGTERM during the first pause
  auto s = unload_driver(b.env, b.services, b.run);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "terminated by SIGTERM");
  EXPECT_THAT(b.host.calls, IsEmpty());
}

TEST(UnloadDriverStep, APodNoStepTookOffThatHoldsTheGpuIsEvictedBeforeTheUnload) {
  RunBench b;
  const std::string uid = b.add_workload("stray", /*gpu=*/false);
  b.watch_pods();
  b.host.holders = {{.pid = 7, .comm = "python3", .pod_uid = uid, .modules = {"nvidia"}}};
  ASSERT_TRUE(unload_driver(b.env, b.services, b.run));
  EXPECT_FALSE(b.cluster.get(kube::paths::pod("work", "stray"))) << "evicted and gone";
  EXPECT_THAT(b.run.evicted.workloads, ElementsAre(uid));
  EXPECT_THAT(b.log.text(), HasSubstr("work/stray (pid 7 (python3)): found holding the GPU on the host, and "
                                      "no rule took it off: evicting it as a GPU workload"));
  EXPECT_THAT(b.host.calls, ElementsAre("unload-nvidia", "unmount", "remove-pid"));
  EXPECT_THAT(b.entered, IsEmpty()) << "in the unload's own phase";
}

// A holder the run may not evict fails the step before the unload; the advice to designate it as a GPU client
// is given only for a pod that is not one already.
TEST(UnloadDriverStep, AHolderThatMayNotBeEvictedFailsWithAdviceThatFitsIt) {
  for (const bool annotated : {false, true}) {
    SCOPED_TRACE(annotated ? "an annotated GPU client" : "an ordinary pod");
    RunBench b;
    b.add_pod("bare");  // no controller, no DRAIN_USE_FORCE
    auto pod = b.cluster.get(kube::paths::pod("work", "bare"));
    ASSERT_TRUE(pod);
    if (annotated) {
      (*pod)["metadata"]["annotations"]["nvidia.com/gpu.client"] = "true";
      b.cluster.apply(*pod);
    }
    b.watch_pods();
    b.host.holders = {
        {.pid = 9, .comm = "agent", .pod_uid = (*pod)["metadata"].value("uid", ""), .modules = {}}};
    auto s = unload_driver(b.env, b.services, b.run);
    ASSERT_FALSE(s);
    EXPECT_THAT(s.error().message,
                HasSubstr("pods found holding the GPU on the host of node n1 cannot be evicted"));
    EXPECT_THAT(s.error().message, HasSubstr("work/bare"));
    EXPECT_EQ(s.error().message.find("Annotate a DaemonSet's pods") == std::string::npos, annotated)
        << s.error().message;
    EXPECT_THAT(b.host.calls, IsEmpty()) << "nothing unloaded";
  }
}

// Pods bound after the last look, one after the other (a scheduler whose caches lag), each refuse the
// unload in turn: each is evicted and the unload tried again until it succeeds.
TEST(UnloadDriverStep, HoldersArrivingThreeTimesAreEvictedEachTimeAndTheUnloadSucceeds) {
  RunBench b;
  b.watch_pods();
  std::vector<std::string> uids;
  for (const char* name : {"late-1", "late-2", "late-3"}) uids.push_back(b.add_workload(name, /*gpu=*/true));
  const Status refused = Error("failed to unload NVIDIA driver kernel modules: nvidia is in use");
  b.host.unload_nvidia_answers = {refused, refused, refused};
  for (const auto& uid : uids)
    b.host.holders_after_unload.push_back(
        {{.pid = 7, .comm = "python3", .pod_uid = uid, .modules = {"nvidia"}}});
  b.host.holders_after_unload.emplace_back();  // nothing holds it after the last eviction
  ASSERT_TRUE(unload_driver(b.env, b.services, b.run));
  EXPECT_THAT(b.host.calls, ElementsAre("unload-nvidia", "unload-nvidia", "unload-nvidia", "unload-nvidia",
                                        "unmount", "remove-pid"));
  for (const char* name : {"late-1", "late-2", "late-3"})
    EXPECT_FALSE(b.cluster.get(kube::paths::pod("work", name))) << name << " evicted and gone";
  EXPECT_THAT(b.run.evicted.workloads, ElementsAre(uids[0], uids[1], uids[2]));
  EXPECT_EQ(b.clock.sleeps(), 2) << "a pause before the second and the third look, none before the first";
  EXPECT_THAT(b.log.text(), HasSubstr("The NVIDIA driver is held by pods that arrived on node n1 after the "
                                      "last look: work/late-3 (GPU workload); evicting them and trying the "
                                      "unload again"));
  EXPECT_THAT(b.log.text(), HasSubstr("info Successfully uninstalled nvidia driver components"));
}

// Something that keeps placing pods to hold the driver is not chased forever: past the late-arrival
// patience the refusal stands, saying so, and without auto drain the step fails.
TEST(UnloadDriverStep, HoldersThatKeepArrivingPastThePatienceFailTheStepSayingSo) {
  RunBench b;
  b.watch_pods();
  b.host.unload_nvidia = Error("nvidia is in use");
  for (int i = 0; i < 20; ++i) {
    const std::string uid = b.add_workload("late-" + std::to_string(i), /*gpu=*/true);
    b.host.holders_after_unload.push_back(
        {{.pid = 7, .comm = "python3", .pod_uid = uid, .modules = {"nvidia"}}});
  }
  auto s = unload_driver(b.env, b.services, b.run);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("nvidia is in use"));
  EXPECT_THAT(s.error().message, HasSubstr("; GPU pods kept arriving on node n1 to hold the driver: evicted "
                                           "them "));
  EXPECT_THAT(s.error().message, HasSubstr("stop it, then run driver-manager again"));
  EXPECT_GE(b.clock.now() - TimePoint{}, kLateArrivalPatience);
  EXPECT_LT(b.clock.now() - TimePoint{},
            kLateArrivalPatience + kLateArrivalLongestPause + std::chrono::seconds(1));
  EXPECT_LT(b.run.evicted.workloads.size(), 20U) << "it stopped evicting once the patience was spent";
  EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "late-19"))) << "the later ones were left";
  EXPECT_THAT(b.log.text(), HasSubstr("error Failed to uninstall nvidia driver components"));
}

TEST(UnloadDriverStep, WithAutoDrainARefusedUnloadCordonsDrainsAndTriesOnceMore) {
  RunBench b(/*evict_workloads=*/true, /*auto_drain=*/true);
  b.watch_pods();
  b.host.unload_nvidia_answers = {Error("nvidia is in use")};
  ASSERT_TRUE(unload_driver(b.env, b.services, b.run));
  EXPECT_THAT(b.host.calls, ElementsAre("unload-nvidia", "unload-nvidia", "unmount", "remove-pid"));
  EXPECT_TRUE(unschedulable(b));
  EXPECT_FALSE(b.undo.empty()) << "the cordon registered its undo";
  EXPECT_THAT(b.log.text(), HasSubstr("Unable to cleanup driver modules, attempting again with node drain"));
}

TEST(UnloadDriverStep, WithoutAutoDrainARefusedUnloadFailsTheStepAndCordonsNothing) {
  RunBench b;
  b.watch_pods();
  b.host.unload_nvidia = Error("nvidia is in use");
  auto s = unload_driver(b.env, b.services, b.run);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("failed to unload NVIDIA driver kernel modules"));
  EXPECT_TRUE(b.undo.empty());
  EXPECT_THAT(b.log.text(), HasSubstr("error Failed to uninstall nvidia driver components"));
}

TEST(EvictLateArrivalsStep, NothingArrivedOpensNoPhase) {
  RunBench b;
  b.add_pod("plain");
  b.watch_pods();
  ASSERT_TRUE(evict_late_arrivals(b.services, b.run));
  EXPECT_THAT(b.entered, IsEmpty());
  EXPECT_THAT(b.run.evicted.workloads, IsEmpty());
  EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "plain"))) << "no GPU user: left alone";
}

TEST(EvictLateArrivalsStep, AGpuWorkloadThatArrivedIsEvictedInTheEvictWorkloadsPhase) {
  RunBench b;
  const std::string uid = b.add_workload("late", /*gpu=*/true);
  b.watch_pods();
  ASSERT_TRUE(evict_late_arrivals(b.services, b.run));
  EXPECT_THAT(b.entered, ElementsAre(Phase::kEvictWorkloads));
  EXPECT_THAT(b.run.evicted.workloads, ElementsAre(uid));
  EXPECT_FALSE(b.cluster.get(kube::paths::pod("work", "late")));
}

TEST(EvictLateArrivalsStep, WithoutWorkloadEvictionAGpuWorkloadIsNotItsToTake) {
  RunBench b(/*evict_workloads=*/false);
  b.add_workload("late", /*gpu=*/true);
  b.watch_pods();
  ASSERT_TRUE(evict_late_arrivals(b.services, b.run));
  EXPECT_THAT(b.entered, IsEmpty());
  EXPECT_TRUE(b.cluster.get(kube::paths::pod("work", "late")));
}

}  // namespace
}  // namespace dm::manager
