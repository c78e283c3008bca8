// One entry per step (docs/ARCHITECTURE.md, The step table): a step's row holds its name, when a path that
// lists it takes it, how the run takes it and how `plan` shows it. Each row is defined in its step's file,
// beside the step's body; the table (flow_steps.cc) lists the rows in Step order and the paths' step lists.
// The run (Uninstall::execute) and `plan` (manager/plan/build.cc) both read a step only through its row.
#pragma once

#include <string_view>

#include "common/result.h"
#include "manager/commands/flow_steps.h"
#include "manager/commands/run_context.h"
#include "manager/commands/run_services.h"
#include "manager/commands/step_env.h"
#include "manager/commands/step_plan.h"

namespace dm::manager {

// What the run hands a step's functions when it takes the step.
// A test makes one of its own and runs a step through its row, alone (tests/unit/run_steps_test.cc).
struct StepCall {
  const StepEnv& env;     // the collaborators every path has (step_env.h)
  RunContext& run;        // what the steps before it handed on, and where it hands on what it finds
  RunServices& services;  // the path, the undo list, the progress and its phases (run_services.h)
};

struct StepDef {
  Step step;
  std::string_view name;  // "pause-operands", ...: its name in tests and in the docs
  // A report logs only: no cancellation check, no phase of its own.
  bool report = false;
  // When a path that lists it takes it (its path rule); nullptr: always.
  bool (*taken)(const FlowFacts& f, bool evict_workloads) = nullptr;
  // What the step does.
  Status (*run)(StepCall& c) = nullptr;
  // Whether it has anything to do, from what the steps before it found; false: passed over. nullptr: it
  // always has.
  bool (*needed)(const RunContext& run) = nullptr;
  // Whether it opens its phase; nullptr: it does.
  bool (*opens_phase)(const StepEnv& env) = nullptr;
  // What it does before the cancellation check that precedes it (a registration made before a write must
  // not be lost to a SIGTERM that arrives in between); nullptr: nothing.
  void (*before_check)(StepCall& c) = nullptr;
  // Its own write takes the lease when the lease is still to be taken (the run takes it before any other
  // step that writes or acts on the node).
  bool carries_first_write = false;
  // How `plan` shows it: zero or more lines, and the pods and labels it takes; nullptr: no line.
  void (*render)(StepPlan& plan) = nullptr;
};

// The row of `step` (the table in flow_steps.cc).
const StepDef& step_def(Step step);

}  // namespace dm::manager
