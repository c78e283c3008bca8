#include "manager/commands/cleanup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "manager/rules/guidance.h"

namespace dm::manager {

std::vector<std::string> cleanup_on_failure(const CleanupInput& in, const Error& cause) {
  spdlog::info("Performing cleanup on failure");
  const auto& s = in.settings;
  const std::string guidance =
      cleanup_guidance(in.node.node(), {.policy_enabled = in.policy,
                                        .gpu_pod_eviction = s.enable_gpu_pod_eviction,
                                        .auto_drain = s.enable_auto_drain});
  if (!guidance.empty()) {
    spdlog::warn("{}", guidance);
    spdlog::warn("{}", gpu_client_guidance(in.node.node()));
  }

  auto left = in.undo.run_best_effort(in.clock, in.deadline);
  std::string message =
      "driver-manager failed to prepare the node for the driver installation: " + cause.message;
  if (!left.empty()) {
    const std::string todo = fmt::format("{}", fmt::join(left, "; "));
    spdlog::error(
        "Could not restore node {} completely; left for the next run of driver-manager (or `driver-manager "
        "recover`): {}",
        in.node.node(), todo);
    message += "\nNot restored: " + todo;
  }
  if (!guidance.empty()) message += "\n" + guidance + gpu_client_guidance(in.node.node());
  in.node.event("DriverUninstallFailed", message, "Warning");
  return left;
}

}  // namespace dm::manager
