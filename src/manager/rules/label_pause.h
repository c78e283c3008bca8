// Which DaemonSet pods a label pause takes off the node (docs/behaviour.md, Operand waits): a pod that fits
// the node as the operator labelled it and no longer fits once the run's labels are paused, as the scheduler
// and the DaemonSet controller decide fitting (kube/node_affinity: the nodeSelector and the required node
// affinity). The DaemonSet controller decides on its DaemonSet's pod template: it replaces the required
// node affinity of each pod it creates by one term that pins the pod to its node (matchFields
// metadata.name), so a DaemonSet pod's own spec no longer shows the terms that select the node. One rule for
// the run's operand wait, its client reset and `plan`.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/node_affinity.h"

namespace dm::manager {

// The node before and after the pause batch, and the paused keys whose DaemonSet pods the run waits for
// (gpu.deploy.client, the custom key).
// The pod templates (spec.template) of the DaemonSets whose pods run on the node, by "ns/name".
using DaemonSetTemplates = std::map<std::string, nlohmann::json>;

struct LabelPause {
  kube::NodePlacement before;  // every operand label at the value it is restored to
  kube::NodePlacement after;   // the pause batch applied
  std::vector<std::string> keys;
  // Where a DaemonSet pod's placement is read from: its DaemonSet's template; a pod whose DaemonSet is not
  // here is judged by its own spec.
  DaemonSetTemplates daemonset_templates;
};

// How the pause of a key takes a pod off.
enum class PlacementRule { kNodeSelector, kNodeAffinity };

struct TakenOff {
  std::string key;
  PlacementRule rule = PlacementRule::kNodeSelector;
  // "nodeSelector key <k>" or "node affinity on <k>".
  [[nodiscard]] std::string describe() const;
};

// `pod` is owned by a DaemonSet, its nodeSelector or required node affinity (those of its DaemonSet's
// template when pause.daemonset_templates has it) names `key`, and it fits `pause.before` but not
// `pause.after`; the rule is the nodeSelector when that is what stops matching.
std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause,
                                           std::string_view key);
// The same for the first of pause.keys that takes it off.
std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause);

}  // namespace dm::manager
