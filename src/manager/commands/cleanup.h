// cleanup-on-failure: whenever a run fails (or is terminated) after it changed the node, print the guidance,
// run the undo list (our cordon, our taint, the paused operand labels) within the time budget, name whatever
// could not be undone, and record a Warning Event on the node. See docs/behaviour.md, "Cleanup on failure".
#pragma once

#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "manager/node/node_ops.h"
#include "manager/node/undo.h"
#include "manager/rules/settings.h"

namespace dm::manager {

struct CleanupInput {
  const Settings& settings;
  NodeOps& node;        // for the Event; its cancel token must not be the SIGTERM one
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
