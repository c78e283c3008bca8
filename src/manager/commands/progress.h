// What a run tells the people watching it (docs/behaviour.md, Progress): the phase it is in and since when
// (kept on the node as an annotation, so that `kubectl describe node` shows it), the duration of each phase
// and what each one did (the summary line at the end), and the one progress line every wait logs at a
// steady cadence (manager/wait_progress). Pure bookkeeping: manager/progress_reporter writes what this
// produces.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "manager/pods/wait_progress.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

// The phases of a run, in the order the full path takes them.
enum class Phase {
  kPauseOperands,  // pause the operand labels; their pods go while the annotated GPU clients are reset
                   // and the GPU workloads evicted from the cordoned node
  // What is left before the unload: the full-drain fallback, the DRA plugins and clients. The GPU-workload
  // eviction itself runs in kPauseOperands, beside the operand wait; its pods are still counted here.
  // Named for compatibility: "evict-workloads" is read by people and scripts in the state annotation, the
  // summary line and the log.
  kEvictWorkloads,
  kUnloadDriver,      // unload the kernel modules, unmount the driver root, unbind vfio
  kCleanDriverRoot,   // no-driver and skip paths: the stale driver root, nouveau, vfio
  kWaitMofed,         // GPUDirect RDMA: wait for the MOFED driver
  kRestore,           // success: taint, cordon, labels back
  kCleanupOnFailure,  // failure or SIGTERM: the same, best effort
};

// "pause-operands": the name in the annotation, the log and the summary.
std::string_view phase_name(Phase p);

// The phases of one run, their durations and counters, the annotation value and the summary line.
// Thread-safe: waits may report from any thread.
class RunProgress {
 public:
  explicit RunProgress(const Clock& clock);

  // Ends the current phase (its duration is kept) and begins `p`.
  void begin(Phase p);
  // Ends the current phase (at the end of the run).
  void end();
  [[nodiscard]] std::optional<Phase> current() const;
  // The latest wait of the current phase (cleared by begin()).
  void set_waiting(const WaitStatus& s);

  // Counters for the summary.
  void add_paused_labels(size_t n);
  // Pods that left the node during phase `p` (but GPU clients); GPU workloads evicted during pause-operands
  // are counted under kEvictWorkloads, whose words they get ("evicted <n> GPU pods"), entered or not.
  void add_pods_gone(Phase p, size_t n);
  void add_gpu_clients_reset(size_t n);  // annotated GPU clients that left during pause-operands
  // GPU pods evicted because the host found them holding the driver (counted as GPU pods too).
  void add_host_holders_evicted(size_t n);
  void add_modules_unloaded(size_t n);
  // What the restore left on the node on purpose, and why (UndoList::kept()): "the cordon, under ...".
  void add_kept(const std::string& what);

  // The value of kStateAnnotation: "phase=<p>; since=<RFC3339>[; waiting for <n> of <m> pods: <names>];
  // run started=<RFC3339>".
  [[nodiscard]] std::string annotation_value() const;
  // "Summary: <outcome> in 6.3s: paused 8 labels, ...[; left on the node: <kept>]; phases: pause-operands
  // 1.2s, ..."
  // `outcome` e.g. "node prepared", "failed in phase evict-workloads".
  [[nodiscard]] std::string summary(std::string_view outcome) const;

  struct PhaseTime {
    Phase phase;
    Duration took;
  };
  [[nodiscard]] std::vector<PhaseTime> phases() const;

 private:
  void end_locked();

  const Clock& clock_;
  mutable std::mutex mu_;
  TimePoint run_start_;
  std::chrono::system_clock::time_point run_start_wall_;
  std::optional<Phase> current_;
  TimePoint phase_start_{};
  std::chrono::system_clock::time_point phase_start_wall_{};
  std::optional<WaitStatus> waiting_;
  std::vector<PhaseTime> done_;
  size_t paused_labels_ = 0;
  std::map<Phase, size_t> pods_gone_;
  size_t modules_unloaded_ = 0;
  size_t gpu_clients_reset_ = 0;
  size_t host_holders_evicted_ = 0;
  std::vector<std::string> kept_;
};

}  // namespace dm::manager
