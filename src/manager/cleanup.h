// cleanup-on-failure (spec 3.10, issue 4 decisions 3 and 6): whenever the run fails (or is terminated)
// after it changed the node, undo what this run owns - our cordon, extra undo actions registered by later
// steps (e.g. issue 5's taint) - print the guidance, put the operand labels back, and record an Event.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "manager/node_ops.h"
#include "manager/operands.h"
#include "manager/settings.h"

namespace dm::manager {

// A named undo action of a step (run before the labels are restored; a failure is only a warning).
struct UndoAction {
  std::string name;
  std::function<Status()> run;
};

struct CleanupInput {
  const Settings& settings;
  NodeOps& node;  // its cancel token must not be the SIGTERM one: cleanup runs after SIGTERM too
  const Snapshot& snapshot;
  const std::vector<OperandSpec>& table;
  bool may_own_cordon = true;  // false: neither this run nor a crashed one cordoned the node (saves a GET)
  std::vector<UndoAction> undo;
};

// Logs "Performing cleanup on failure", uncordons if the cordon is ours (legacy_uncordon: upstream's
// rule), runs the undo actions, warns with the guidance when the policy or the settings keep
// driver-manager from evicting, restores the operand labels (warning on failure) and records a Warning
// Event on the node naming `cause`.
void cleanup_on_failure(const CleanupInput& in, const Error& cause);

}  // namespace dm::manager
