#include "manager/rules/label_pause.h"

#include "kube/objects.h"

namespace dm::manager {

std::string TakenOff::describe() const {
  return (rule == PlacementRule::kNodeSelector ? "nodeSelector key " : "node affinity on ") + key;
}

namespace {

// What the DaemonSet controller asks whether the node keeps the pod: its DaemonSet's pod template, else the
// pod's own spec.
const nlohmann::json& placement_of(const nlohmann::json& pod, const LabelPause& pause) {
  if (pause.daemonset_templates.empty()) return pod;
  const auto ref = kube::controller_ref(pod);
  if (!ref) return pod;
  const auto it = pause.daemonset_templates.find(kube::namespace_of(pod) + "/" + ref->name);
  return it != pause.daemonset_templates.end() ? it->second : pod;
}

}  // namespace

std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause,
                                           std::string_view key) {
  if (!kube::controlled_by_kind(pod, "DaemonSet")) return std::nullopt;
  const nlohmann::json& placed = placement_of(pod, pause);
  const bool by_selector = kube::pod_node_selector_has(placed, key);
  if (!by_selector && !kube::required_node_affinity_keys(placed).contains(std::string(key)))
    return std::nullopt;
  if (!kube::pod_fits_node(placed, pause.before) || kube::pod_fits_node(placed, pause.after))
    return std::nullopt;
  const bool selector_stops = by_selector && !kube::node_selector_matches(placed, pause.after);
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
