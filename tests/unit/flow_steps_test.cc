// The run's path and steps as data: the order the paths are tried, the steps of each, the phases they open.
#include "manager/commands/flow_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "manager/commands/step_def.h"

namespace dm::manager {
namespace {

using ::testing::ElementsAre;

FlowFacts loaded() {
  FlowFacts f;
  f.nvidia_loaded = true;
  f.gpu_pod_eviction = true;
  return f;
}

std::vector<Step> steps_of(const FlowSteps& p) {
  std::vector<Step> out;
  for (const auto& s : p.steps) out.push_back(s.step);
  return out;
}

std::optional<Phase> phase_of(const FlowSteps& p, Step step) {
  for (const auto& s : p.steps) {
    if (s.step == step) return s.phase;
  }
  throw std::runtime_error("no step " + std::string(step_name(step)));
}

TEST(FlowSteps, PathsAreTriedInOrder) {
  FlowFacts f = loaded();
  f.host_driver = true;
  f.refused = true;
  f.skip = true;
  EXPECT_EQ(decide_steps(f).path, RunPath::kPreInstalled) << "a host driver comes before everything";
  f.host_driver = false;
  EXPECT_EQ(decide_steps(f).path, RunPath::kRefused);
  f.refused = false;
  EXPECT_EQ(decide_steps(f).path, RunPath::kSkip);
  f.nvidia_loaded = false;
  EXPECT_EQ(decide_steps(f).path, RunPath::kNoDriver) << "nothing loaded: nothing to keep either";
  f = loaded();
  EXPECT_EQ(decide_steps(f).path, RunPath::kFull);
  EXPECT_EQ(path_name(RunPath::kNoDriver), "no-driver");
  EXPECT_EQ(path_name(RunPath::kPreInstalled), "pre-installed");
}

TEST(FlowSteps, FullPathStepsAndPhases) {
  const FlowSteps p = decide_steps(loaded());
  EXPECT_TRUE(p.evict_workloads);
  EXPECT_THAT(steps_of(p),
              ElementsAre(Step::kPauseOperands, Step::kTakeGpuUsersOff, Step::kReportSkipDecision,
                          Step::kEvictLateArrivals, Step::kResetDraPluginClients, Step::kUnloadDriver,
                          Step::kUnbindVfio, Step::kWaitMofed, Step::kUndoChanges, Step::kUnloadNouveau));
  EXPECT_THAT(p.phases(), ElementsAre(Phase::kPauseOperands, Phase::kEvictWorkloads, Phase::kUnloadDriver,
                                      Phase::kRestore));
  EXPECT_EQ(phase_of(p, Step::kWaitMofed), Phase::kUnloadDriver) << "without RDMA it opens no phase";
}

// Pods bound after the cordon or the taint are looked for once more before anything is unloaded, on the
// full path only: the skip and no-driver paths unload nothing a late pod could hold.
TEST(FlowSteps, OnlyThePathThatUnloadsLooksForLateArrivalsBeforeTheUnload) {
  FlowFacts f = loaded();
  const auto has = [](const FlowSteps& p) {
    const auto s = steps_of(p);
    const auto late = std::find(s.begin(), s.end(), Step::kEvictLateArrivals);
    return late != s.end() && std::find(late, s.end(), Step::kUnloadDriver) != s.end();
  };
  EXPECT_TRUE(has(decide_steps(f)));
  f.gpu_pod_eviction = false;  // the clients still arrive late; the workloads are left to the unload
  EXPECT_TRUE(has(decide_steps(f)));
  f.skip = true;
  EXPECT_FALSE(has(decide_steps(f)));
  f.skip = false;
  f.nvidia_loaded = false;
  EXPECT_FALSE(has(decide_steps(f)));
  EXPECT_EQ(step_name(Step::kEvictLateArrivals), "evict-late-arrivals");
}

TEST(FlowSteps, DraAutoDrainAndRdmaAddTheirSteps) {
  FlowFacts f = loaded();
  f.dra_on = true;
  f.auto_drain = true;
  f.gpu_direct_rdma = true;
  const FlowSteps p = decide_steps(f);
  EXPECT_THAT(steps_of(p),
              ElementsAre(Step::kPauseOperands, Step::kTakeGpuUsersOff, Step::kReportSkipDecision,
                          Step::kDrainAfterFailedEviction, Step::kEvictLateArrivals, Step::kAwaitDraHelpers,
                          Step::kCheckDraClaims, Step::kResetDraPluginClients, Step::kPauseDraPlugin,
                          Step::kUnloadDriver, Step::kUnbindVfio, Step::kWaitMofed, Step::kUndoChanges,
                          Step::kUnloadNouveau));
  EXPECT_THAT(p.phases(), ElementsAre(Phase::kPauseOperands, Phase::kEvictWorkloads, Phase::kUnloadDriver,
                                      Phase::kWaitMofed, Phase::kRestore));
}

TEST(FlowSteps, WorkloadsAreEvictedWithEvictionOnOrWithDraAndTheDrainFallback) {
  FlowFacts f = loaded();
  f.gpu_pod_eviction = false;
  EXPECT_FALSE(decide_steps(f).evict_workloads);
  f.auto_drain = true;
  EXPECT_FALSE(decide_steps(f).evict_workloads) << "auto drain alone waits for a failed unload";
  f.dra_on = true;
  EXPECT_TRUE(decide_steps(f).evict_workloads);
  f.skip = true;
  EXPECT_FALSE(decide_steps(f).evict_workloads) << "the skip path evicts no workload";
}

// A step's path rule (its row in flow_steps.cc) decides whether a path that lists it takes it.
TEST(FlowSteps, PathRulesTakeAStepOnlyWhereItHasSomethingToDo) {
  const auto has = [](const FlowSteps& p, Step step) {
    const auto s = steps_of(p);
    return std::find(s.begin(), s.end(), step) != s.end();
  };
  FlowFacts f = loaded();
  f.gpu_pod_eviction = false;
  f.auto_drain = true;
  EXPECT_FALSE(has(decide_steps(f), Step::kDrainAfterFailedEviction))
      << "no workload eviction to fall back from";
  f.gpu_pod_eviction = true;
  EXPECT_TRUE(has(decide_steps(f), Step::kDrainAfterFailedEviction));
  f.auto_drain = false;
  EXPECT_FALSE(has(decide_steps(f), Step::kDrainAfterFailedEviction)) << "no fallback without auto drain";
  EXPECT_FALSE(has(decide_steps(f), Step::kCheckDraClaims));
  EXPECT_FALSE(has(decide_steps(f), Step::kAwaitDraHelpers));
  EXPECT_FALSE(has(decide_steps(f), Step::kPauseDraPlugin));
  f.dra_on = true;
  EXPECT_EQ(phase_of(decide_steps(f), Step::kAwaitDraHelpers), Phase::kEvictWorkloads)
      << "the DRA driver's helpers are waited for while the plugin runs";
  EXPECT_EQ(step_name(Step::kAwaitDraHelpers), "await-dra-helpers");
  EXPECT_EQ(phase_of(decide_steps(f), Step::kCheckDraClaims), Phase::kEvictWorkloads)
      << "the claim guard runs";
  EXPECT_TRUE(has(decide_steps(f), Step::kPauseDraPlugin));
  f.nvidia_loaded = false;
  EXPECT_EQ(steps_of(decide_steps(f)).front(), Step::kPauseDraPlugin) << "the no-driver path pauses it first";
}

TEST(FlowSteps, SkipPathBouncesTheClientsAndKeepsTheDriver) {
  FlowFacts f = loaded();
  f.skip = true;
  f.dra_on = true;
  const FlowSteps p = decide_steps(f);
  EXPECT_THAT(steps_of(p),
              ElementsAre(Step::kPauseOperands, Step::kTakeGpuUsersOff, Step::kReportSkipDecision,
                          Step::kPauseDraPlugin, Step::kCleanStaleMounts, Step::kUndoChanges));
  EXPECT_THAT(p.phases(), ElementsAre(Phase::kPauseOperands, Phase::kCleanDriverRoot, Phase::kRestore));
}

TEST(FlowSteps, NoDriverPathEvictsNothing) {
  FlowFacts f;
  f.gpu_direct_rdma = true;
  const FlowSteps p = decide_steps(f);
  EXPECT_THAT(steps_of(p), ElementsAre(Step::kRemoveStaleDriverRoot, Step::kUnloadNouveau, Step::kUnbindVfio,
                                       Step::kWaitMofed, Step::kRestoreLabels, Step::kUndoChanges));
  EXPECT_THAT(p.phases(), ElementsAre(Phase::kCleanDriverRoot, Phase::kWaitMofed, Phase::kRestore));
}

TEST(FlowSteps, PreInstalledAndRefusedPathsHaveNoPhases) {
  FlowFacts f;
  f.host_driver = true;
  const FlowSteps p = decide_steps(f);
  EXPECT_THAT(steps_of(p), ElementsAre(Step::kLabelPreInstalled, Step::kAwaitRemoval));
  EXPECT_TRUE(p.phases().empty());
  f.host_driver = false;
  f.refused = true;
  EXPECT_TRUE(decide_steps(f).steps.empty());
}

// Every path begins and ends by its row, through the same loop: only the pre-installed path fails once its
// steps are done, and only it holds nothing to restore (a failure there is logged, not cleaned up).
TEST(FlowSteps, EachPathSaysHowTheRunBeginsAndEndsIt) {
  const PathEnds& pre = path_ends(RunPath::kPreInstalled);
  EXPECT_TRUE(pre.done_is_failure);
  EXPECT_FALSE(pre.restores);
  EXPECT_EQ(pre.done_line, "driver is pre-installed on host");
  for (const RunPath p : {RunPath::kNoDriver, RunPath::kSkip, RunPath::kFull}) {
    SCOPED_TRACE(path_name(p));
    EXPECT_FALSE(path_ends(p).done_is_failure);
    EXPECT_TRUE(path_ends(p).restores);
    EXPECT_FALSE(path_ends(p).done_line.empty());
  }
  EXPECT_EQ(path_ends(RunPath::kNoDriver).start_line,
            "No NVIDIA driver loaded, skipping eviction of GPU clients and workloads");
  EXPECT_TRUE(path_ends(RunPath::kFull).start_line.empty());
  EXPECT_EQ(path_ends(RunPath::kFull).done_line, "Driver uninstallation completed successfully");
}

TEST(FlowSteps, EveryStepHasItsOwnName) {
  std::set<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(Step::kUndoChanges); ++i)
    names.insert(step_name(static_cast<Step>(i)));
  EXPECT_EQ(names.size(), static_cast<size_t>(Step::kUndoChanges) + 1);
  EXPECT_TRUE(step_is_report(Step::kReportSkipDecision));
  EXPECT_FALSE(step_is_report(Step::kUnloadDriver));
}

// The table (flow_steps.cc) lists each step's row, defined in the step's own file, at the step's place: a
// row listed twice or out of order would give one step another one's body.
TEST(FlowSteps, TheTableHoldsEachStepsOwnRowAndEachRowRuns) {
  for (size_t i = 0; i < kStepCount; ++i) {
    const auto step = static_cast<Step>(i);
    const StepDef& row = step_def(step);
    EXPECT_EQ(row.step, step) << "row " << i << " is " << row.name;
    EXPECT_NE(row.run, nullptr) << row.name;
    EXPECT_EQ(row.name, step_name(step));
  }
  // Only the lease's carrier skips the lease check before it; only a report runs without a check.
  EXPECT_TRUE(step_def(Step::kPauseOperands).carries_first_write);
  EXPECT_FALSE(step_def(Step::kTakeGpuUsersOff).carries_first_write);
  EXPECT_FALSE(step_def(Step::kUnloadDriver).report);
}

}  // namespace
// flow_facts: the one place the run and `plan` turn what they know into the facts of the decision.
TEST(FlowFacts, TheUpgradePolicySupersedesTheEvictionSwitches) {
  Settings s;
  s.enable_gpu_pod_eviction = true;
  s.enable_auto_drain = true;
  s.gpu_direct_rdma_enabled = true;
  const FlowInputs in{.nvidia_loaded = true, .dra_label = true};
  FlowFacts f = flow_facts(s, in, nullptr);
  EXPECT_TRUE(f.gpu_pod_eviction);
  EXPECT_TRUE(f.auto_drain);
  EXPECT_TRUE(f.gpu_direct_rdma);
  f = flow_facts(s, FlowInputs{.nvidia_loaded = true, .upgrade_policy = true}, nullptr);
  EXPECT_FALSE(f.gpu_pod_eviction);
  EXPECT_FALSE(f.auto_drain);
  EXPECT_EQ(decide_steps(f).path, RunPath::kFull);
  EXPECT_FALSE(decide_steps(f).evict_workloads);
}

TEST(FlowFacts, DraInUseIsAskedOnlyWhenTheLoadedDriverWillBeUnloadedAndTheLabelSaysNo) {
  const Settings s;
  int asked = 0;
  const DraInUse in_use = [&] {
    ++asked;
    return std::string("the DRA driver's kubelet plugin runs on the node");
  };
  EXPECT_TRUE(flow_facts(s, {.nvidia_loaded = true, .dra_label = true}, in_use).dra_on);
  EXPECT_EQ(asked, 0) << "the operator's label says it";
  EXPECT_FALSE(flow_facts(s, {.nvidia_loaded = true, .skip = true}, in_use).dra_on);
  EXPECT_FALSE(flow_facts(s, {}, in_use).dra_on);
  EXPECT_EQ(asked, 0) << "the skip and no-driver paths do not ask";
  const FlowFacts f = flow_facts(s, {.nvidia_loaded = true}, in_use);
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(f.dra_on);
  EXPECT_EQ(phase_of(decide_steps(f), Step::kCheckDraClaims), Phase::kEvictWorkloads)
      << "the claim guard runs";
  EXPECT_FALSE(flow_facts(s, {.nvidia_loaded = true}, [] { return std::string(); }).dra_on);
}

TEST(FlowFacts, ASkipDecisionWithoutALoadedDriverIsNoSkip) {
  const Settings s;
  const FlowFacts f = flow_facts(s, {.skip = true}, nullptr);
  EXPECT_FALSE(f.skip);
  EXPECT_EQ(decide_steps(f).path, RunPath::kNoDriver);
  EXPECT_EQ(decide_steps(flow_facts(s, {.host_driver = true, .nvidia_loaded = true}, nullptr)).path,
            RunPath::kPreInstalled);
  EXPECT_EQ(decide_steps(flow_facts(s, {.refused = true, .nvidia_loaded = true}, nullptr)).path,
            RunPath::kRefused);
}

}  // namespace dm::manager
