// Shows a run's progress on its node (docs/behaviour.md, Progress): the state annotation written at each
// phase boundary (or carried by the patch that follows at once) and refreshed during long waits. Every write
// goes out from a thread of its own, one at a time, with the newest state: a wait that reports never waits
// for the API server, and best-effort reporting (a refused write is logged once) never stalls the run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "kube/api.h"
#include "kube/stopped_by.h"
#include "manager/commands/progress.h"
#include "manager/node/known_node.h"
#include "manager/node/lease.h"

namespace dm::manager {

// When a phase's state is written: at once, or with the node patch or the wait that follows at once.
enum class StateWrite { kNow, kRideAlong };

// What stop() does with the writes asked for and not yet done: waits for them (a release that removes the
// annotation must come after them), or cancels the one under way (the run has ended: nothing waits for a
// best-effort write).
enum class PendingWrites { kFinish, kCancel };

// When the state of a phase of the path reaches the node. The pause's goes with the pause patch; the
// unload's and the driver root's with the first pod wait or node write that follows, or not at all when
// they have none (they are short, and the summary still times them); the restore's never on its own: the
// patch that ends the run removes the annotation. The phases that may last long without a pod wait (MOFED)
// or whose waits start late (the drain, the DRA plugins) write theirs at once.
StateWrite state_write_for(Phase phase);

class ProgressReporter {
 public:
  ProgressReporter(kube::Api& client, const Clock& clock, std::string node_name, KnownNode& known);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  RunProgress& progress() { return progress_; }

  // Begins `phase`. Its state is written before this returns (so that a watcher sees every phase, in
  // order), unless it rides along with the node patch or the wait that follows at once.
  void begin(Phase phase, StateWrite write);
  // The state to put into a node patch sent now, when the current phase left it to that patch.
  std::optional<std::string> ride_along_state();
  // The patch that carried it was applied.
  void carried();
  // The wait observer of the pod waits: writes the pending state when a wait starts, and names what a long
  // wait still waits for (at most every 30 s, when that changed). Never waits for a write.
  void on_wait(const WaitStatus& status, bool started);
  // From now on a long wait's refresh goes with the lease's next renewal (at most its renewal period
  // later) instead of a write of its own; the phases' states are still written as before.
  RenewalRider renewal_rider();
  // Ends the writer: with kFinish once the writes asked for are done (the lease release that removes the
  // state annotation must come after the last of them), with kCancel at once, the write under way cancelled
  // without waiting for its answer. Idempotent.
  void stop(PendingWrites pending = PendingWrites::kFinish);

 private:
  void post();        // asks for a write of the newest state
  void write_now();   // asks for one and waits until a write begun after the call has ended
  void write_loop();  // the writer thread
  void write();       // one merge patch of the annotation

  CancelToken cancel_writes_;  // fired by stop(kCancel): a child of the caller's token (SIGTERM)
  kube::StoppedBy client_;     // the writes, stopped by cancel_writes_
  const Clock& clock_;
  std::string node_name_;
  KnownNode& known_;
  RunProgress progress_;

  std::mutex state_mu_;   // never held across a request
  bool pending_ = false;  // the current phase's state rides along with the next patch or wait
  std::optional<TimePoint> wait_written_at_;  // last write asked for by a long wait
  std::vector<std::string> wait_written_;     // what it named
  bool refresh_by_renewal_ = false;           // renewal_rider() was handed out
  bool refresh_due_ = false;                  // a long wait's refresh waits for the next renewal

  std::mutex writer_mu_;
  std::condition_variable writer_cv_;
  std::uint64_t asked_ = 0;    // writes asked for
  std::uint64_t started_ = 0;  // the number of asks the write under way (or the last one) covers
  std::uint64_t done_ = 0;     // asks covered by ended writes
  bool stopping_ = false;
  bool write_failed_ = false;  // writer thread only
  std::thread writer_;         // last: started once the members above exist
};

}  // namespace dm::manager
