#include "manager/commands/cleanup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "common/duration_text.h"
#include "manager/rules/guidance.h"

namespace dm::manager {

CancelToken cleanup_token(const Clock& clock, Deadline deadline, const CancelToken& sigterm, bool terminated,
                          Duration grace) {
  const CancelToken own;  // not SIGTERM's: the restore goes on after it
  if (terminated) return own.child_until(clock, deadline);
  return own.child_until(clock, deadline, {.signal = sigterm, .within = grace, .on_cut = [](Duration left) {
                                             spdlog::warn(
                                                 "Received SIGTERM during the restore: ending it within {}",
                                                 format_duration(left, DurationStyle::kWholeSeconds));
                                           }});
}

CleanupContext::CleanupContext(kube::Api& client, const Clock& clock, CancelToken cancel,
                               const std::string& node, KnownNode& known)
    : cancel_(std::move(cancel)), node_(client, clock, cancel_, node), taint_(client, clock, cancel_, node) {
  node_.use_known_node(&known);
  taint_.use_known_node(&known);
}

std::vector<std::string> cleanup_on_failure(const CleanupInput& in, const Error& cause) {
  spdlog::info("Performing cleanup on failure");
  const auto& s = in.settings;
  const std::string guidance =
      cleanup_guidance(in.writers.node.node(), {.policy_enabled = in.policy,
                                                .gpu_pod_eviction = s.enable_gpu_pod_eviction,
                                                .auto_drain = s.enable_auto_drain});
  if (!guidance.empty()) {
    spdlog::warn("{}", guidance);
    spdlog::warn("{}", gpu_client_guidance(in.writers.node.node()));
  }

  auto left = in.undo.run_best_effort(in.writers, in.clock, in.deadline);
  std::string message =
      "driver-manager failed to prepare the node for the driver installation: " + cause.message;
  if (!left.empty()) {
    const std::string todo = fmt::format("{}", fmt::join(left, "; "));
    spdlog::error(
        "Could not restore node {} completely; left for the next run of driver-manager (or `driver-manager "
        "recover`): {}",
        in.writers.node.node(), todo);
    message += "\nNot restored: " + todo;
  }
  if (!guidance.empty()) message += "\n" + guidance + gpu_client_guidance(in.writers.node.node());
  in.writers.node.event("DriverUninstallFailed", message, "Warning");
  return left;
}

}  // namespace dm::manager
