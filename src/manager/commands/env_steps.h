// The steps that are functions over the run's environment (step_env.h) alone, or over what an earlier step
// handed on (run_context.h): those that act on the host (host_steps.cc: the kernel modules, the driver root,
// vfio, MOFED), the pre-installed path's (pre_installed_steps.cc) and those that take pods off the node with
// the run's collaborators only (pod_steps.cc). Each is taken by its row (step_def.h), defined beside it,
// and each runs alone in tests/unit/env_steps_test.cc.
#pragma once

#include "common/result.h"
#include "manager/commands/step_env.h"
#include "manager/rules/skip.h"

namespace dm::manager {

// label-pre-installed: the node labeled nvidia.com/gpu.deploy.driver=pre-installed (the driver DaemonSet
// leaves it).
Status label_pre_installed(const StepEnv& env);
// await-removal: gives the DaemonSet controller PRE_INSTALLED_SLEEP to delete this pod; SIGTERM ends it.
Status await_removal(const StepEnv& env);
// The NVIDIA kernel modules, all or nothing, then the stale driver root; a refusal names the holders.
Status unload_nvidia_modules(const StepEnv& env);
// remove-stale-driver-root, clean-stale-mounts: the old driver root unmounted, its PID file removed.
Status remove_stale_driver_root(const StepEnv& env);
// unload-nouveau: when it is loaded.
Status unload_nouveau(const StepEnv& env);
// unbind-vfio: `vfio-manage unbind --all`, its output logged line by line.
Status unbind_vfio(const StepEnv& env);
// wait-mofed: with GPUDirect RDMA on and a Mellanox device present, until the MOFED driver is ready.
Status wait_for_mofed(const StepEnv& env);

// report-skip-decision: what the skip decision read (RunContext::skip), logged where the run reports it.
void report_skip_decision(const SkipDecision& skip);
// drain-after-failed-eviction: the full drain, once a failed GPU-workload eviction handed it on
// (WorkloadEviction::kDrainPending); the node is cordoned already.
Status drain_after_failed_eviction(const StepEnv& env);
// check-dra-claims: no pod of the node may still hold a GPU resource claim.
Status check_dra_claims(const StepEnv& env);
// reset-dra-plugin-clients: the annotated GPU clients that are DRA kubelet plugins, after the workloads.
Status reset_dra_plugin_clients(const StepEnv& env);

}  // namespace dm::manager
