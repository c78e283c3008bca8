#include "manager/commands/flow_steps.h"

#include <algorithm>
#include <array>

#include "manager/pods/drain.h"

namespace dm::manager {

namespace {

// One row per step, in Step order: its name, whether it is a report, and when a path that lists it takes
// it (its path rule; the paths' lists below say where, in which phase).
struct StepInfo {
  Step step;
  std::string_view name;
  bool report = false;
  bool (*taken)(const FlowFacts& f, bool evict_workloads) = nullptr;  // nullptr: always
};

constexpr bool dra_on(const FlowFacts& f, bool /*evict_workloads*/) {
  return f.dra_on;
}

constexpr std::array kSteps{
    StepInfo{.step = Step::kLabelPreInstalled, .name = "label-pre-installed"},
    StepInfo{.step = Step::kAwaitRemoval, .name = "await-removal"},
    StepInfo{.step = Step::kPauseOperands, .name = "pause-operands"},
    StepInfo{.step = Step::kTakeGpuUsersOff, .name = "take-gpu-users-off"},
    StepInfo{.step = Step::kReportSkipDecision, .name = "report-skip-decision", .report = true},
    // The full-drain fallback of a failed GPU-workload eviction: only where the workloads are evicted.
    StepInfo{.step = Step::kDrainAfterFailedEviction,
             .name = "drain-after-failed-eviction",
             .taken = [](const FlowFacts& f, bool evict) { return evict && f.auto_drain; }},
    StepInfo{.step = Step::kEvictLateArrivals, .name = "evict-late-arrivals"},
    StepInfo{.step = Step::kCheckDraClaims, .name = "check-dra-claims", .taken = dra_on},
    StepInfo{.step = Step::kResetDraPluginClients, .name = "reset-dra-plugin-clients"},
    StepInfo{.step = Step::kPauseDraPlugin, .name = "pause-dra-plugin", .taken = dra_on},
    StepInfo{.step = Step::kUnloadDriver, .name = "unload-driver"},
    StepInfo{.step = Step::kRemoveStaleDriverRoot, .name = "remove-stale-driver-root"},
    StepInfo{.step = Step::kCleanStaleMounts, .name = "clean-stale-mounts"},
    StepInfo{.step = Step::kUnloadNouveau, .name = "unload-nouveau"},
    StepInfo{.step = Step::kUnbindVfio, .name = "unbind-vfio"},
    StepInfo{.step = Step::kWaitMofed, .name = "wait-mofed"},
    StepInfo{.step = Step::kRestoreLabels, .name = "restore-labels"},
    StepInfo{.step = Step::kUndoChanges, .name = "undo-changes"},
};

static_assert(one_row_per_step(kSteps), "kSteps holds one row per Step, in Step order");

const StepInfo& info(Step step) {
  return kSteps[static_cast<size_t>(step)];
}

// Appends steps to a path's list, each in the phase last opened, when its path rule takes it.
class PathBuilder {
 public:
  PathBuilder(std::vector<PlannedStep>& out, const FlowFacts& facts, bool evict_workloads)
      : out_(out), facts_(facts), evict_workloads_(evict_workloads) {}
  PathBuilder& phase(Phase p, bool when = true) {
    if (when) phase_ = p;
    return *this;
  }
  PathBuilder& add(Step s) {
    const auto taken = info(s).taken;
    if (taken == nullptr || taken(facts_, evict_workloads_)) out_.push_back({s, phase_});
    return *this;
  }

 private:
  std::vector<PlannedStep>& out_;
  const FlowFacts& facts_;
  bool evict_workloads_;
  std::optional<Phase> phase_;
};

// A driver installed on the host itself makes the containerized driver unnecessary: the node is labeled so
// that the driver DaemonSet leaves it, and the run waits to be removed.
void pre_installed_path(const FlowFacts& /*f*/, PathBuilder& b) {
  b.add(Step::kLabelPreInstalled).add(Step::kAwaitRemoval);
}

// The run stops before any write (`plan` shows it; the run fails before deciding its steps).
void refused_path(const FlowFacts& /*f*/, PathBuilder& /*b*/) {}

void full_path(const FlowFacts& f, PathBuilder& b) {
  b.phase(Phase::kPauseOperands)
      .add(Step::kPauseOperands)
      .add(Step::kTakeGpuUsersOff)
      .add(Step::kReportSkipDecision)
      .phase(Phase::kEvictWorkloads)
      .add(Step::kDrainAfterFailedEviction)
      .add(Step::kEvictLateArrivals)  // bound after the cordon or the taint (the scheduler lags behind)
      .add(Step::kCheckDraClaims)
      .add(Step::kResetDraPluginClients)  // third-party DRA plugins go last, like ours
      .add(Step::kPauseDraPlugin)
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
void skip_path(const FlowFacts& /*f*/, PathBuilder& b) {
  b.phase(Phase::kPauseOperands)
      .add(Step::kPauseOperands)
      .add(Step::kTakeGpuUsersOff)
      .add(Step::kReportSkipDecision)
      .phase(Phase::kCleanDriverRoot)
      .add(Step::kPauseDraPlugin)
      .add(Step::kCleanStaleMounts)
      .phase(Phase::kRestore)
      .add(Step::kUndoChanges);
}

// Nothing holds a driver that is not loaded, so nothing is evicted (evicting DRA claim holders here would
// deadlock: their unprepare needs the kubelet plugin, which cannot start before the driver is installed).
void no_driver_path(const FlowFacts& f, PathBuilder& b) {
  b.phase(Phase::kCleanDriverRoot)
      .add(Step::kPauseDraPlugin)
      .add(Step::kRemoveStaleDriverRoot)
      .add(Step::kUnloadNouveau)
      .add(Step::kUnbindVfio)
      .phase(Phase::kWaitMofed, f.gpu_direct_rdma)
      .add(Step::kWaitMofed)
      .phase(Phase::kRestore)
      .add(Step::kRestoreLabels)  // labels left paused by a crashed run
      .add(Step::kUndoChanges);   // a cordon left by a crashed run
}

// One row per path, in RunPath order: its name, how the run begins and ends it, and its steps.
struct PathRow {
  RunPath path;
  std::string_view name;
  PathEnds ends = {};
  void (*steps)(const FlowFacts& f, PathBuilder& b);
};

constexpr std::array kPaths{
    PathRow{
        .path = RunPath::kPreInstalled,
        .name = "pre-installed",
        .ends = {.done_line = "driver is pre-installed on host", .done_is_failure = true, .restores = false},
        .steps = pre_installed_path},
    PathRow{.path = RunPath::kRefused, .name = "refused", .steps = refused_path},
    PathRow{.path = RunPath::kNoDriver,
            .name = "no-driver",
            .ends = {.start_line = "No NVIDIA driver loaded, skipping eviction of GPU clients and workloads",
                     .done_line = "Node prepared for the driver installation (no driver was loaded)"},
            .steps = no_driver_path},
    PathRow{.path = RunPath::kSkip,
            .name = "skip",
            .ends = {.done_line = "Node prepared for the driver installation (driver kept)"},
            .steps = skip_path},
    PathRow{.path = RunPath::kFull,
            .name = "full",
            .ends = {.done_line = "Driver uninstallation completed successfully"},
            .steps = full_path},
};

constexpr bool one_row_per_path() {
  for (size_t i = 0; i < kPaths.size(); ++i) {
    if (static_cast<size_t>(kPaths[i].path) != i) return false;
  }
  return kPaths.size() == static_cast<size_t>(RunPath::kFull) + 1;
}
static_assert(one_row_per_path(), "kPaths holds one row per RunPath, in RunPath order");

const PathRow& path_row(RunPath path) {
  return kPaths[static_cast<size_t>(path)];
}

RunPath decide_path(const FlowFacts& f) {
  if (f.host_driver) return RunPath::kPreInstalled;
  if (f.refused) return RunPath::kRefused;
  if (!f.nvidia_loaded) return RunPath::kNoDriver;
  return f.skip ? RunPath::kSkip : RunPath::kFull;
}

}  // namespace

std::string_view path_name(RunPath path) {
  return path_row(path).name;
}

const PathEnds& path_ends(RunPath path) {
  return path_row(path).ends;
}

std::string_view step_name(Step step) {
  return info(step).name;
}

bool step_is_report(Step step) {
  return info(step).report;
}

std::vector<Phase> FlowSteps::phases() const {
  std::vector<Phase> out;
  for (const auto& s : steps) {
    if (s.phase && !step_is_report(s.step) && (out.empty() || out.back() != *s.phase))
      out.push_back(*s.phase);
  }
  return out;
}

FlowFacts flow_facts(const Settings& settings, const FlowInputs& in, const DraInUse& dra_in_use) {
  FlowFacts f;
  f.host_driver = in.host_driver;
  f.refused = in.refused;
  f.nvidia_loaded = in.nvidia_loaded;
  f.skip = in.nvidia_loaded && in.skip;
  f.dra_on = in.dra_label;
  // Installed some other way than by the operator: the claim guard and the plugin's order still apply.
  if (!f.dra_on && f.nvidia_loaded && !f.skip && dra_in_use) f.dra_on = !dra_in_use().empty();
  const EvictionSwitches switches = eviction_switches(settings, in.upgrade_policy);
  f.gpu_pod_eviction = switches.gpu_pod_eviction;
  f.auto_drain = switches.auto_drain;
  f.gpu_direct_rdma = settings.gpu_direct_rdma_enabled;
  return f;
}

FlowSteps decide_steps(const FlowFacts& facts) {
  FlowSteps plan;
  plan.facts = facts;
  plan.path = decide_path(facts);
  // The GPU-workload step runs with eviction on, or with DRA and the drain fallback on.
  plan.evict_workloads =
      plan.path == RunPath::kFull && (facts.gpu_pod_eviction || (facts.dra_on && facts.auto_drain));
  PathBuilder b(plan.steps, facts, plan.evict_workloads);
  path_row(plan.path).steps(facts, b);
  return plan;
}

}  // namespace dm::manager
