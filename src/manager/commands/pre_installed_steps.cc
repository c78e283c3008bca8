// The pre-installed path's steps: a driver installed on the host itself makes the containerized driver
// unnecessary (docs/behaviour.md, The paths).
#include <spdlog/spdlog.h>

#include <string>

#include "manager/commands/env_steps.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

Status label_pre_installed(const StepEnv& env) {
  spdlog::info("NVIDIA GPU driver is already pre-installed on the node, disabling the containerized driver");
  spdlog::info("Labeling node {} with {}={}", env.run.settings.node_name, kDriverLabel, kPreInstalledValue);
  return env.run.node.update_labels({{std::string(kDriverLabel), std::string(kPreInstalledValue)}});
}

// Gives the DaemonSet controller time to delete this pod, whose nodeSelector no longer matches.
Status await_removal(const StepEnv& env) {
  if (!env.run.clock.sleep_for(env.run.settings.pre_installed_sleep, env.run.cancel))
    return Error("Received SIGTERM while waiting to be removed from the node");
  return ok_status();
}

}  // namespace dm::manager
