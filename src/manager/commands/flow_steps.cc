#include "manager/commands/flow_steps.h"

#include <algorithm>
#include <array>

#include "manager/commands/step_def.h"
#include "manager/pods/drain.h"

namespace dm::manager {

// The steps' rows, each defined in its step's file beside its body (step_def.h).
const StepDef& label_pre_installed_step();          // pre_installed_steps.cc
const StepDef& await_removal_step();                // pre_installed_steps.cc
const StepDef& pause_operands_step();               // label_steps.cc
const StepDef& take_gpu_users_off_step();           // gpu_users_steps.cc
const StepDef& report_skip_decision_step();         // pod_steps.cc
const StepDef& drain_after_failed_eviction_step();  // pod_steps.cc
const StepDef& evict_late_arrivals_step();          // unload_steps.cc
const StepDef& await_dra_helpers_step();            // pod_steps.cc
const StepDef& check_dra_claims_step();             // pod_steps.cc
const StepDef& reset_dra_plugin_clients_step();     // pod_steps.cc
const StepDef& pause_dra_plugin_step();             // label_steps.cc
const StepDef& unload_driver_step();                // unload_steps.cc
const StepDef& remove_stale_driver_root_step();     // host_steps.cc
const StepDef& clean_stale_mounts_step();           // host_steps.cc
const StepDef& unload_nouveau_step();               // host_steps.cc
const StepDef& unbind_vfio_step();                  // host_steps.cc
const StepDef& wait_mofed_step();                   // host_steps.cc
const StepDef& restore_labels_step();               // label_steps.cc
const StepDef& undo_changes_step();                 // uninstall_writes.cc

namespace {

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
    const auto taken = step_def(s).taken;
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
      .add(Step::kAwaitDraHelpers)    // the plugin, still running, takes them off once their claims go
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

// One row per step, in Step order (the row's `step` says which; tests/unit/flow_steps_test.cc checks it).
const StepDef& step_def(Step step) {
  static const std::array<const StepDef*, kStepCount> kRows{
      &label_pre_installed_step(),
      &await_removal_step(),
      &pause_operands_step(),
      &take_gpu_users_off_step(),
      &report_skip_decision_step(),
      &drain_after_failed_eviction_step(),
      &evict_late_arrivals_step(),
      &await_dra_helpers_step(),
      &check_dra_claims_step(),
      &reset_dra_plugin_clients_step(),
      &pause_dra_plugin_step(),
      &unload_driver_step(),
      &remove_stale_driver_root_step(),
      &clean_stale_mounts_step(),
      &unload_nouveau_step(),
      &unbind_vfio_step(),
      &wait_mofed_step(),
      &restore_labels_step(),
      &undo_changes_step(),
  };
  return *kRows.at(static_cast<size_t>(step));
}

std::string_view step_name(Step step) {
  return step_def(step).name;
}

bool step_is_report(Step step) {
  return step_def(step).report;
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
