// The steps that are functions over the run's environment (step_env.h) alone: those that act on the host
// (host_steps.cc: the kernel modules, the driver root, vfio, MOFED) and the pre-installed path's
// (pre_installed_steps.cc). Each is taken by its row of the run's table (Uninstall::step_run) and each runs
// alone in tests/unit/env_steps_test.cc.
#pragma once

#include "common/result.h"
#include "manager/commands/step_env.h"

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

}  // namespace dm::manager
