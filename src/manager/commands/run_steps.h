// The steps that need the run's services (run_services.h) beside its environment (step_env.h) and what the
// steps before them handed on (run_context.h): functions over the three, each taken by its row (step_def.h)
// defined beside its body, and each run alone in tests/unit/run_steps_test.cc against the in-memory cluster.
#pragma once

#include "common/result.h"
#include "manager/commands/run_context.h"
#include "manager/commands/run_services.h"
#include "manager/commands/step_env.h"

namespace dm::manager {

// evict-late-arrivals: a fresh look for GPU users bound after the cordon or the taint, evicted until none
// arrive (RunContext::late); the evict-workloads phase opens only when something did arrive.
Status evict_late_arrivals(RunServices& services, RunContext& run);
// pause-operands: the operand labels paused (their restore registered first) with the record of their
// value before; the GPU-client reset is told which DaemonSet pods the pause takes off.
Status pause_operands(const StepEnv& env, RunServices& services, RunContext& run);
// take-gpu-users-off: the operand waits, the reset of the annotated GPU clients (not DRA plugins) and, when
// the path evicts workloads, the cordon and the GPU-workload eviction, side by side; the first to fail
// stops the others and is the step's error. A failed eviction with auto drain on hands the full drain on
// (RunContext::workload_eviction) instead of failing.
Status take_gpu_users_off(const StepEnv& env, RunServices& services, RunContext& run);
// pause-dra-plugin: the DRA kubelet plugin's label paused last, after its claim-holding clients, and its
// pods waited for.
Status pause_dra_plugin(const StepEnv& env, RunServices& services, RunContext& run);
// restore-labels (the no-driver path): labels left paused by an earlier run put back.
Status restore_labels(const StepEnv& env, RunServices& services);
// unload-driver: the holders the host shows first (a process outside any pod that still holds the driver
// after the host-holder patience fails the run; a pod no step took off is evicted), then the modules, all or
// nothing, and the old driver root. A refusal whose holders are all pods this run may evict (bound after the
// last look) evicts them and tries again, as long as such pods keep arriving within the late-arrival
// patience; with auto drain on, a refusal after that cordons, drains the node and tries once more.
Status unload_driver(const StepEnv& env, RunServices& services, RunContext& run);

}  // namespace dm::manager
