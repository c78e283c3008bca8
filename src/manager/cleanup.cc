#include "manager/cleanup.h"

#include <spdlog/spdlog.h>

#include "manager/guidance.h"

namespace dm::manager {

void cleanup_on_failure(const CleanupInput& in, const Error& cause) {
  spdlog::info("Performing cleanup on failure");
  const auto& s = in.settings;
  const bool policy = in.snapshot.policy_enabled();
  const bool can_evict = !policy && (s.enable_gpu_pod_eviction || s.enable_auto_drain);

  if (s.legacy_uncordon) {
    if (can_evict) {
      if (auto u = in.node.uncordon(true); !u) spdlog::warn("Failed to uncordon node: {}", u.error().message);
    }
  } else if (in.may_own_cordon) {
    if (auto u = in.node.uncordon(false); !u) spdlog::warn("Failed to uncordon node: {}", u.error().message);
  }

  for (const auto& action : in.undo) {
    if (auto r = action.run(); !r) spdlog::warn("Failed to {}: {}", action.name, r.error().message);
  }

  const std::string guidance =
      cleanup_guidance(in.node.node(), policy, s.enable_gpu_pod_eviction, s.enable_auto_drain);
  if (!guidance.empty()) spdlog::warn("{}", guidance);

  spdlog::info(
      "Rescheduling all GPU clients on the current node by enabling their component-specific nodeSelector "
      "labels");
  const auto body = restore_patch(in.snapshot, in.table);
  if (patch_has_labels(body)) {
    if (auto r = in.node.update_labels(body["metadata"]["labels"]); !r) {
      spdlog::warn("Failed to restore the GPU operand labels of node {}: {}", in.node.node(),
                   r.error().message);
    }
  }

  std::string message =
      "driver-manager failed to prepare the node for the driver installation: " + cause.message;
  if (!guidance.empty()) message += "\n" + guidance;
  in.node.event("DriverUninstallFailed", message, "Warning");
}

}  // namespace dm::manager
