// The run's path and its ordered steps, decided once as data from what was read (docs/ARCHITECTURE.md, The
// uninstall flow and its undo list): `uninstall_driver` executes this list step by step, `plan` renders it,
// and the phases it yields are the boundaries the run reports. A new step is one enumerator here, its row
// (step_def.h: its name, path rule, how the run takes it and how `plan` shows it) in its own file beside its
// body, and the row's place in the table and the path lists of flow_steps.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "manager/commands/progress.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// The paths of a run, in the order they are tried (docs/behaviour.md, The paths).
enum class RunPath : std::uint8_t {
  kPreInstalled,  // a driver installed on the host itself: label the node, wait to be removed, exit 1
  kRefused,       // something refuses the run before any write (`plan` only: the run fails there)
  kNoDriver,      // no NVIDIA driver loaded: nothing is evicted
  kSkip,          // the loaded driver is kept
  kFull,          // the loaded driver is uninstalled
};

// "pre-installed", "refused", "no-driver", "skip", "full": `plan`'s words for the paths.
std::string_view path_name(RunPath path);

// How the run begins and ends a path, around its steps (one row per path in flow_steps.cc, beside its step
// list): every path goes through the same loop (Uninstall::execute) and the same end (Uninstall::conclude).
struct PathEnds {
  std::string_view start_line = {};  // logged before its first step ("" = none)
  std::string_view done_line = {};   // logged once its steps are done ("" = none)
  // Its steps done, the run still fails: the line is logged at critical level and the exit code is 1 (the
  // pre-installed path: the pod waits to be removed by the DaemonSet controller).
  bool done_is_failure = false;
  // A failure restores the node (the undo list, then the lease): the path holds the lease and registers
  // what it changes. false: it holds no lease and undoes nothing, so a failure is logged only.
  bool restores = true;
};
const PathEnds& path_ends(RunPath path);

// The steps of the paths. Each one is a unit of the run (a cancellation check comes before it) and of the
// plan's step list (it renders zero or more lines).
enum class Step : std::uint8_t {
  kLabelPreInstalled,         // label the node nvidia.com/gpu.deploy.driver=pre-installed
  kAwaitRemoval,              // wait for the DaemonSet controller to remove this pod, then exit 1
  kPauseOperands,             // pause the operand labels (their restore registered first)
  kTakeGpuUsersOff,           // operand wait | taint + GPU-client reset | cordon + GPU-workload eviction
  kReportSkipDecision,        // log the skip decision (a report: no cancellation check, no phase of its own)
  kDrainAfterFailedEviction,  // the full-drain fallback after a failed GPU-workload eviction
  kEvictLateArrivals,         // a fresh look: GPU users bound after the cordon or taint are evicted too
  kAwaitDraHelpers,           // the DRA driver's helper pods leave as the plugin unprepares their claims
  kCheckDraClaims,            // no pod may still hold a GPU resource claim
  kResetDraPluginClients,     // annotated GPU clients that are DRA kubelet plugins
  kPauseDraPlugin,            // pause the DRA kubelet-plugin label and wait for its pods
  kUnloadDriver,              // unload the modules (with the full-drain fallback), unmount the driver root
  kRemoveStaleDriverRoot,     // no driver loaded: unmount a stale driver root
  kCleanStaleMounts,          // skip path: unmount a stale driver root, remove stale state files
  kUnloadNouveau,             // unload nouveau when loaded
  kUnbindVfio,                // vfio-manage unbind --all
  kWaitMofed,                 // GPUDirect RDMA: wait for the MOFED driver
  kRestoreLabels,             // no-driver path: labels left paused by an earlier run
  kUndoChanges,               // the undo list, newest first: our cordon, the taint, the labels
};

inline constexpr size_t kStepCount = static_cast<size_t>(Step::kUndoChanges) + 1;

// "pause-operands", ...: a step's name in test tables.
std::string_view step_name(Step step);
// A report logs only: no cancellation check, no phase change.
bool step_is_report(Step step);

struct PlannedStep {
  Step step;
  std::optional<Phase> phase;  // the phase it runs in; nullopt on the pre-installed path (no phases)
};

// What becomes of a GPU-client taint left by an earlier run: a run that will unload the driver (the nvidia
// module is loaded) keeps it on until after the unload; the other paths remove it at the start.
enum class LeftoverTaint { kKeepUntilUnload, kRemoveNow };

// What the decision is made from.
struct FlowFacts {
  bool host_driver = false;       // a driver is installed on the host itself
  bool refused = false;           // the run would stop before any write
  bool nvidia_loaded = false;     // the nvidia module is loaded
  bool skip = false;              // the skip decision keeps the loaded driver
  bool dra_on = false;            // the DRA kubelet plugin is deployed on the node
  bool gpu_pod_eviction = false;  // effective switches (the upgrade policy supersedes them)
  bool auto_drain = false;
  bool gpu_direct_rdma = false;  // GPU_DIRECT_RDMA_ENABLED
};

// What the run and `plan` both know when the path is decided: the run reads it from the host and the node,
// `plan` reads or infers it (docs/plan.md). flow_facts turns it into FlowFacts, for both.
struct FlowInputs {
  bool host_driver = false;     // a driver is installed on the host itself
  bool refused = false;         // something stops the run before any write
  bool nvidia_loaded = false;   // the nvidia module is loaded
  bool skip = false;            // the skip decision keeps the loaded driver (asked only when loaded)
  bool upgrade_policy = false;  // the node's upgrade-policy annotation (Snapshot::policy_enabled)
  bool dra_label = false;       // the operator deployed its DRA driver here (Snapshot::dra_on)
};

// Why DRA is in use though the operator did not deploy its driver here ("" = it is not): the driver
// installed some other way (dra_plugin.h). Asked only where the answer changes the steps: the driver is
// loaded and will be unloaded.
using DraInUse = std::function<std::string()>;

// The facts the path is decided from: the eviction switches (the upgrade policy supersedes them) and DRA
// (the operator's label, else `dra_in_use`). No I/O of its own.
FlowFacts flow_facts(const Settings& settings, const FlowInputs& in, const DraInUse& dra_in_use);

struct FlowSteps {
  FlowFacts facts;  // what it was decided from
  RunPath path = RunPath::kRefused;
  bool evict_workloads = false;  // the cordon and GPU-workload eviction run beside the operand wait
  std::vector<PlannedStep> steps;

  // The phases the steps run in, in order, each once: the boundaries the run can report. A phase whose
  // steps all turn out to have nothing to do at run time (the full-drain fallback, DRA plugin clients) is
  // listed but may not be entered.
  [[nodiscard]] std::vector<Phase> phases() const;
};

FlowSteps decide_steps(const FlowFacts& facts);

}  // namespace dm::manager
