// The steps that take pods off the node with the run's collaborators alone, and the skip decision's report
// (docs/behaviour.md, Full-drain fallback, DRA claims and Skip-uninstall).
#include <spdlog/spdlog.h>

#include "manager/commands/env_steps.h"
#include "manager/pods/drain.h"

namespace dm::manager {

void report_skip_decision(const SkipDecision& skip) {
  if (skip.checked) {
    spdlog::info(
        "Checking if the currently loaded NVIDIA driver version and configuration matches the desired "
        "state...");
  }
  if (skip.warning) {
    spdlog::warn("{}", skip.log_line);
  } else if (!skip.log_line.empty()) {
    spdlog::info("{}", skip.log_line);
  }
  if (!skip.skip) return;
  spdlog::info(
      "The NVIDIA driver is already loaded with the desired version and configuration, skipping the "
      "uninstallation of the driver in an attempt to not disrupt running workloads");
}

Status drain_after_failed_eviction(const StepEnv& env) {
  spdlog::info("Attempting node drain");
  return drain_node(env.run);
}

Status check_dra_claims(const StepEnv& env) {
  return check_dra_claim_holders(env.run);
}

Status reset_dra_plugin_clients(const StepEnv& env) {
  return env.clients.reset_dra_plugin_clients();
}

}  // namespace dm::manager
