// Which DaemonSet pods a label pause takes off the node (docs/behaviour.md, Operand waits): a pod that fits
// the node as the operator labelled it and no longer fits once the run's labels are paused, as the scheduler
// and the DaemonSet controller decide fitting (kube/node_affinity: the nodeSelector and the required node
// affinity). One rule for the run's operand wait, its client reset and `plan`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/node_affinity.h"

namespace dm::manager {

// The node before and after the pause batch, and the paused keys whose DaemonSet pods the run waits for
// (gpu.deploy.client, the custom key).
struct LabelPause {
  kube::NodePlacement before;  // every operand label at the value it is restored to
  kube::NodePlacement after;   // the pause batch applied
  std::vector<std::string> keys;
};

// How the pause of a key takes a pod off.
enum class PlacementRule { kNodeSelector, kNodeAffinity };

struct TakenOff {
  std::string key;
  PlacementRule rule = PlacementRule::kNodeSelector;
  // "nodeSelector key <k>" or "node affinity on <k>".
  [[nodiscard]] std::string describe() const;
};

// `pod` is owned by a DaemonSet, its nodeSelector or required node affinity names `key`, and it fits
// `pause.before` but not `pause.after`; the rule is the nodeSelector when that is what stops matching.
std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause,
                                           std::string_view key);
// The same for the first of pause.keys that takes it off.
std::optional<TakenOff> taken_off_by_pause(const nlohmann::json& pod, const LabelPause& pause);

}  // namespace dm::manager
