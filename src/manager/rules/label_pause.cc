#include "manager/rules/label_pause.h"

#include "kube/objects.h"

namespace dm::manager {

std::string TakenOff::describe() const {
  return (rule == PlacementRule::kNodeSelector ? "nodeSelector key " : "node affinity on ") + key;
}

std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause,
                                           std::string_view key) {
  if (!kube::controlled_by_kind(pod, "DaemonSet")) return std::nullopt;
  const bool by_selector = kube::pod_node_selector_has(pod, key);
  if (!by_selector && !kube::required_node_affinity_keys(pod).contains(std::string(key))) return std::nullopt;
  if (!kube::pod_fits_node(pod, pause.before) || kube::pod_fits_node(pod, pause.after)) return std::nullopt;
  const bool selector_stops = by_selector && !kube::node_selector_matches(pod, pause.after);
  return TakenOff{std::string(key),
                  selector_stops ? PlacementRule::kNodeSelector : PlacementRule::kNodeAffinity};
}

std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause) {
  for (const auto& k : pause.keys) {
    if (auto t = taken_off_by_pause(pod, pause, k)) return t;
  }
  return std::nullopt;
}

}  // namespace dm::manager
