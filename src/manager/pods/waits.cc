#include "manager/pods/waits.h"

#include <spdlog/spdlog.h>

#include "manager/rules/pod_rules.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

std::optional<TakenOff> taken_off(const Json& pod, const OperandWait& wait) {
  if (wait.kind != WaitKind::kDaemonSetNodeSelectorKey || !wait.pause) return std::nullopt;
  return taken_off_by_pause(pod, *wait.pause, wait.node_selector_key);
}

}  // namespace

std::optional<std::string> wait_reason(const Json& pod, const OperandWait& wait,
                                       const std::string& operator_namespace) {
  if (wait.kind == WaitKind::kDaemonSetNodeSelectorKey) {
    const auto t = taken_off(pod, wait);
    if (!t) return std::nullopt;
    if (t->rule == PlacementRule::kNodeSelector) return wait.description();
    return "daemon set pods with " + t->describe();
  }
  if (!pod_matches_wait(pod, wait, operator_namespace)) return std::nullopt;
  return wait.description();
}

Deadline operand_wait_deadline(const DrainContext& ctx) {
  const Duration timeout = ctx.settings.operand_wait_timeout;
  return timeout == Duration::zero() ? Deadline::none() : Deadline::after(ctx.clock, timeout);
}

TakenBeside operand_pods(std::vector<OperandWait> waits, std::string operator_namespace) {
  return [waits = std::move(waits),
          ns = std::move(operator_namespace)](const Json& pod) -> std::optional<std::string> {
    for (const auto& w : waits) {
      if (pod_matches_wait(pod, w, ns)) return "an operand pod, waited for beside";
    }
    return std::nullopt;
  };
}

bool pod_matches_wait(const Json& pod, const OperandWait& wait, const std::string& operator_namespace) {
  if (wait.kind == WaitKind::kDaemonSetNodeSelectorKey) return taken_off(pod, wait).has_value();
  if (wait.kind != WaitKind::kAppLabel) return false;
  // No copies: this runs for every pod and every wait on each change of the pod cache.
  if (!operator_namespace.empty()) {
    const std::string* ns = kube::find_string(pod, {"metadata", "namespace"});
    if (ns == nullptr || *ns != operator_namespace) return false;
  }
  const std::string* app = kube::find_string(pod, {"metadata", "labels", "app"});
  return app != nullptr && *app == wait.app;
}

namespace {

// For each wait, the pods still matching it.
std::vector<std::vector<std::string>> remaining_by_wait(const PodSnapshot& pods,
                                                        const std::vector<OperandWait>& waits,
                                                        const std::string& operator_namespace) {
  std::vector<std::vector<std::string>> out(waits.size());
  for (const auto& pod : pods) {
    for (size_t i = 0; i < waits.size(); ++i) {
      if (pod_matches_wait(*pod, waits[i], operator_namespace)) out[i].push_back(kube::ref_string(*pod));
    }
  }
  return out;
}

// Each DaemonSet pod that a paused label takes off through its required node affinity, with the rule.
void log_affinity_pods(const PodSnapshot& pods, const std::vector<OperandWait>& waits) {
  for (const auto& pod : pods) {
    for (const auto& w : waits) {
      const auto t = taken_off(*pod, w);
      if (!t || t->rule != PlacementRule::kNodeAffinity) continue;
      spdlog::info(
          "Waiting for daemon set pod {} to terminate: its {} no longer matches once the label is paused",
          kube::ref_string(*pod), t->describe());
      break;
    }
  }
}

}  // namespace

void log_operand_waits_start(const PodWatch& pods, const std::vector<OperandWait>& waits,
                             const std::string& operator_namespace) {
  for (const auto& w : waits) spdlog::info("{}", w.start_line());
  // Upstream also counts the DaemonSet pods of a nodeSelector-key wait while some remain.
  const PodSnapshot now = pods.snapshot();
  const auto at_start = remaining_by_wait(now, waits, operator_namespace);
  log_affinity_pods(now, waits);
  for (size_t i = 0; i < waits.size(); ++i) {
    if (waits[i].kind != WaitKind::kDaemonSetNodeSelectorKey || at_start[i].empty()) continue;
    spdlog::info("Waiting for {} daemon set pod(s) with nodeSelector key \"{}\" to terminate",
                 at_start[i].size(), waits[i].node_selector_key);
  }
}

Status await_operands(const PodWatch& pods, const std::vector<OperandWait>& waits,
                      const std::string& operator_namespace, Deadline deadline, const CancelToken& cancel) {
  if (waits.empty()) return ok_status();
  WaitCheck check = [&](const PodSnapshot& list) -> Result<std::vector<std::string>> {
    std::vector<std::string> left;
    for (const auto& w : waits) {
      for (const auto& pod : list) {
        if (auto why = wait_reason(*pod, w, operator_namespace)) {
          left.push_back(kube::ref_string(*pod) + " (" + *why + ")");
        }
      }
    }
    return left;
  };
  auto s = pods.wait_until("GPU operand pods to shut down", check, deadline, cancel);
  if (s) spdlog::info("All GPU operand pods on the node have shut down");
  return s;
}

Error operand_wait_failed(const PodWatch& pods, const std::vector<OperandWait>& waits,
                          const std::string& operator_namespace, const Error& error) {
  const auto by_wait = remaining_by_wait(pods.snapshot(), waits, operator_namespace);
  for (size_t i = 0; i < waits.size(); ++i) {
    if (!by_wait[i].empty()) spdlog::error("{}", waits[i].failure_line(error.message));
  }
  return error.wrap("failed to evict GPU operator components");
}

Status wait_for_operands(const PodWatch& pods, const std::vector<OperandWait>& waits,
                         const std::string& operator_namespace, Deadline deadline,
                         const CancelToken& cancel) {
  if (waits.empty()) return ok_status();
  log_operand_waits_start(pods, waits, operator_namespace);
  auto s = await_operands(pods, waits, operator_namespace, deadline, cancel);
  if (s) return s;
  return operand_wait_failed(pods, waits, operator_namespace, s.error());
}

}  // namespace dm::manager
