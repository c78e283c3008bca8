// What the steps that change the node share with the run besides its environment (step_env.h) and what the
// steps before them handed on (run_context.h): the path decided, the undo list every change registers with,
// the run's progress and its phases. Made with the run (Uninstall) and handed to each step by the run's
// table (StepCall, step_def.h); a test gives a step one of its own (tests/unit/run_steps_test.cc).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "manager/commands/flow_steps.h"
#include "manager/commands/operand_labels.h"
#include "manager/commands/progress.h"
#include "manager/commands/run_context.h"
#include "manager/node/undo.h"
#include "manager/rules/operands.h"

namespace dm::manager {

struct RunServices {
  const FlowSteps& flow;  // the path and the facts it was decided from (workloads evicted, auto drain)
  UndoList& undo;         // every change to the node registers its undo here, before its write
  RunProgress& progress;  // what the run reports of itself (the pods found holding the GPU on the host, ...)
  // The node's operand labels as the lease found them (the run takes them before any step) and the operand
  // table, their templates, the record of what was paused, the restore.
  OperandLabels& labels;
  // Pauses `labels` on the node with their record in one patch: the run's first write when the lease is
  // still to be taken (it carries the lease, and the cordon and taint due then).
  std::function<Status(const nlohmann::json& labels, FirstWrite& first)> pause_labels;
  // The run's restore on success: the undo list and the lease release, in one node write when every change
  // can be undone in it (undo-changes).
  std::function<Status()> undo_changes;
  // Opens `phase` from inside a step (the evict-workloads phase, once late arrivals are found).
  std::function<void(Phase)> enter;
};

}  // namespace dm::manager
