#include "manager/commands/flow_plan.h"

#include <algorithm>
#include <array>

namespace dm::manager {

namespace {

struct StepInfo {
  Step step;
  std::string_view name;
  bool report;
};

constexpr std::array kSteps{
    StepInfo{Step::kLabelPreInstalled, "label-pre-installed", false},
    StepInfo{Step::kAwaitRemoval, "await-removal", false},
    StepInfo{Step::kPauseOperands, "pause-operands", false},
    StepInfo{Step::kTakeGpuUsersOff, "take-gpu-users-off", false},
    StepInfo{Step::kReportSkipDecision, "report-skip-decision", true},
    StepInfo{Step::kDrainAfterFailedEviction, "drain-after-failed-eviction", false},
    StepInfo{Step::kEvictLateArrivals, "evict-late-arrivals", false},
    StepInfo{Step::kCheckDraClaims, "check-dra-claims", false},
    StepInfo{Step::kResetDraPluginClients, "reset-dra-plugin-clients", false},
    StepInfo{Step::kPauseDraPlugin, "pause-dra-plugin", false},
    StepInfo{Step::kUnloadDriver, "unload-driver", false},
    StepInfo{Step::kRemoveStaleDriverRoot, "remove-stale-driver-root", false},
    StepInfo{Step::kCleanStaleMounts, "clean-stale-mounts", false},
    StepInfo{Step::kUnloadNouveau, "unload-nouveau", false},
    StepInfo{Step::kUnbindVfio, "unbind-vfio", false},
    StepInfo{Step::kWaitMofed, "wait-mofed", false},
    StepInfo{Step::kRestoreLabels, "restore-labels", false},
    StepInfo{Step::kUndoChanges, "undo-changes", false},
};

const StepInfo& info(Step step) {
  return *std::find_if(kSteps.begin(), kSteps.end(), [step](const StepInfo& i) { return i.step == step; });
}

// Appends steps to a path's list, each in the phase last opened.
class PathBuilder {
 public:
  explicit PathBuilder(std::vector<PlannedStep>& out) : out_(out) {}
  PathBuilder& phase(Phase p, bool when = true) {
    if (when) phase_ = p;
    return *this;
  }
  PathBuilder& add(Step s, bool when = true) {
    if (when) out_.push_back({s, phase_});
    return *this;
  }

 private:
  std::vector<PlannedStep>& out_;
  std::optional<Phase> phase_;
};

void full_path(const FlowFacts& f, bool evict, PathBuilder& b) {
  b.phase(Phase::kPauseOperands)
      .add(Step::kPauseOperands)
      .add(Step::kTakeGpuUsersOff)
      .add(Step::kReportSkipDecision)
      .phase(Phase::kEvictWorkloads)
      .add(Step::kDrainAfterFailedEviction, evict && f.auto_drain)
      .add(Step::kEvictLateArrivals)  // bound after the cordon or the taint (the scheduler lags behind)
      .add(Step::kCheckDraClaims, f.dra_on)
      .add(Step::kResetDraPluginClients)  // third-party DRA plugins go last, like ours
      .add(Step::kPauseDraPlugin, f.dra_on)
      .phase(Phase::kUnloadDriver)
      .add(Step::kUnloadDriver)
      .add(Step::kUnbindVfio)
      .phase(Phase::kWaitMofed, f.gpu_direct_rdma)  // off: the step does nothing, in the phase before
      .add(Step::kWaitMofed)
      .phase(Phase::kRestore)
      .add(Step::kUndoChanges)     // our cordon, the taint, the labels, newest first
      .add(Step::kUnloadNouveau);  // after the labels: the next run retries it
}

// The clients are bounced with the operands; a cordon of ours left by a crashed run is undone too. The
// running DRA plugin bind-mounted the old driver root and would lose its dev/ submounts: it goes first.
void skip_path(const FlowFacts& f, PathBuilder& b) {
  b.phase(Phase::kPauseOperands)
      .add(Step::kPauseOperands)
      .add(Step::kTakeGpuUsersOff)
      .add(Step::kReportSkipDecision)
      .phase(Phase::kCleanDriverRoot)
      .add(Step::kPauseDraPlugin, f.dra_on)
      .add(Step::kCleanStaleMounts)
      .phase(Phase::kRestore)
      .add(Step::kUndoChanges);
}

// Nothing holds a driver that is not loaded, so nothing is evicted (evicting DRA claim holders here would
// deadlock: their unprepare needs the kubelet plugin, which cannot start before the driver is installed).
void no_driver_path(const FlowFacts& f, PathBuilder& b) {
  b.phase(Phase::kCleanDriverRoot)
      .add(Step::kPauseDraPlugin, f.dra_on)
      .add(Step::kRemoveStaleDriverRoot)
      .add(Step::kUnloadNouveau)
      .add(Step::kUnbindVfio)
      .phase(Phase::kWaitMofed, f.gpu_direct_rdma)
      .add(Step::kWaitMofed)
      .phase(Phase::kRestore)
      .add(Step::kRestoreLabels)  // labels left paused by a crashed run
      .add(Step::kUndoChanges);   // a cordon left by a crashed run
}

RunPath decide_path(const FlowFacts& f) {
  if (f.host_driver) return RunPath::kPreInstalled;
  if (f.refused) return RunPath::kRefused;
  if (!f.nvidia_loaded) return RunPath::kNoDriver;
  return f.skip ? RunPath::kSkip : RunPath::kFull;
}

}  // namespace

std::string_view path_name(RunPath path) {
  switch (path) {
    case RunPath::kPreInstalled:
      return "pre-installed";
    case RunPath::kRefused:
      return "refused";
    case RunPath::kNoDriver:
      return "no-driver";
    case RunPath::kSkip:
      return "skip";
    case RunPath::kFull:
      return "full";
  }
  return "?";
}

std::string_view step_name(Step step) {
  return info(step).name;
}

bool step_is_report(Step step) {
  return info(step).report;
}

std::vector<Phase> FlowPlan::phases() const {
  std::vector<Phase> out;
  for (const auto& s : steps) {
    if (s.phase && !step_is_report(s.step) && (out.empty() || out.back() != *s.phase))
      out.push_back(*s.phase);
  }
  return out;
}

FlowPlan plan_flow(const FlowFacts& facts) {
  FlowPlan plan;
  plan.path = decide_path(facts);
  PathBuilder b(plan.steps);
  switch (plan.path) {
    case RunPath::kPreInstalled:
      b.add(Step::kLabelPreInstalled).add(Step::kAwaitRemoval);
      break;
    case RunPath::kRefused:
      break;
    case RunPath::kNoDriver:
      no_driver_path(facts, b);
      break;
    case RunPath::kSkip:
      skip_path(facts, b);
      break;
    case RunPath::kFull:
      // The GPU-workload step runs with eviction on, or with DRA and the drain fallback on.
      plan.evict_workloads = facts.gpu_pod_eviction || (facts.dra_on && facts.auto_drain);
      full_path(facts, plan.evict_workloads, b);
      break;
  }
  return plan;
}

}  // namespace dm::manager
