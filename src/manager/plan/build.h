// `driver-manager plan`: what uninstall_driver would do on this node now, decided by the same functions the
// flow calls: the path and its steps are the run's own (manager/commands/flow_steps, with the facts built by
// flow_facts as the run builds them), each step rendered in build.cc; the pods of each step are decided by
// the pipelines the step runs (pause_waits, the gpu-client and workload pipelines, the taint plan). Nothing
// is written: no patch, no eviction, no Event, no lease.
#pragma once

#include "manager/plan/inputs.h"
#include "manager/plan/report.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// Decides the plan from the inputs (no I/O).
Plan build_plan(const Settings& settings, const PlanInputs& in);

}  // namespace dm::manager
