// The `uninstall_driver` sub-command: takes the GPU operands and workloads off the node, unloads the
// NVIDIA kernel modules, tears down the old driver root and brings the operands back (docs/behaviour.md, The
// paths).
#pragma once

#include "manager/rules/settings.h"

namespace dm::manager {

// Runs the whole flow for settings.node_name against the cluster of settings.kubeconfig and the host of
// settings.sim_root ("" = this machine). Returns the process exit code: 0 success / skip / no-driver,
// 1 failure (node restored as far as possible), 143 after SIGTERM (node restored).
int run_uninstall_driver(const Settings& settings);

}  // namespace dm::manager
