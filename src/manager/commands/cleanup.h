// cleanup-on-failure: whenever a run fails (or is terminated) after it changed the node, print the guidance,
// run the undo list (our cordon, our taint, the paused operand labels) within the time budget, name whatever
// could not be undone, and record a Warning Event on the node. See docs/behaviour.md, "Cleanup on failure".
// The cleanup does not send with the run's writers, whose requests SIGTERM stops: it builds its own from a
// token of its own (CleanupContext).
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "manager/node/known_node.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/node/undo.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// The cleanup's token: fires at `deadline` (no request of the cleanup is tried past it), and, for a run that
// SIGTERM did not end, also `grace` after a SIGTERM that arrives during the cleanup ("Received SIGTERM during
// the restore: ending it within ..."), if that is sooner. Never fired by SIGTERM itself: the restore goes on.
CancelToken cleanup_token(const Clock& clock, Deadline deadline, const CancelToken& sigterm, bool terminated,
                          Duration grace);

// What the cleanup after a failure sends its requests with: its token (cleanup_token()) and the node writers
// built on it, sharing the run's copy of the node and so its guarded-write lock (a side step of the run may
// still be finishing a write).
class CleanupContext {
 public:
  CleanupContext(kube::Api& client, const Clock& clock, CancelToken cancel, const std::string& node,
                 KnownNode& known);
  CleanupContext(const CleanupContext&) = delete;
  CleanupContext& operator=(const CleanupContext&) = delete;

  [[nodiscard]] const CancelToken& cancel() const { return cancel_; }
  [[nodiscard]] NodeWriters writers() { return {node_, taint_}; }
  NodeOps& node() { return node_; }

 private:
  CancelToken cancel_;
  NodeOps node_;
  TaintOps taint_;
};

struct CleanupInput {
  const Settings& settings;
  NodeWriters writers;  // the cleanup's (CleanupContext): the undo actions and the Event go through them
  bool policy = false;  // the GPU Operator's auto-upgrade policy is on for the node
  UndoList& undo;
  const Clock& clock;
  Deadline deadline;  // no action is started after it (SIGTERM: inside the pod's grace period)
};

// Logs "Performing cleanup on failure", warns with the guidance when the policy or the settings keep
// driver-manager from evicting, runs the undo list best-effort, logs by name what is left on the node, and
// records a Warning Event naming `cause`. Returns the names of what is left.
std::vector<std::string> cleanup_on_failure(const CleanupInput& in, const Error& cause);

}  // namespace dm::manager
