// The gpu-client taint on JSON: parse `key[=value]:effect` and add/remove it in a spec.taints array (the
// Taint itself and toleration matching are in kube/objects.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"
#include "kube/objects.h"

namespace dm::manager {

// The default GPU-client taint: the key every GPU Operator DaemonSet, the driver's included, tolerates by
// default, so the driver pod is recreated if deleted while it is on and the operator's upgrade controller
// keeps counting the node (docs/gpu-clients.md, "Which taint").
inline constexpr std::string_view kDefaultGpuClientTaint = "nvidia.com/gpu:NoSchedule";

// Parses `key[=value]:effect` with Kubernetes' validation (key: qualified name, value: label value,
// effect: NoSchedule|PreferNoSchedule|NoExecute). Errors quote the input and say what is wrong.
Result<kube::Taint> parse_taint(std::string_view spec);

// True if `taints` (a spec.taints array, or null) has an entry with the same key and effect (the API
// server refuses a second one).
bool has_taint_key_effect(const nlohmann::json& taints, const kube::Taint& taint);
// True if `taints` has an entry with the same key, value and effect.
bool has_exact_taint(const nlohmann::json& taints, const kube::Taint& taint);
// `taints` with `taint` appended, unless an entry with the same key and effect is already there.
nlohmann::json with_taint(const nlohmann::json& taints, const kube::Taint& taint);
// `taints` without entries equal to `taint` in key, value and effect (others kept, order preserved).
nlohmann::json without_taint(const nlohmann::json& taints, const kube::Taint& taint);

}  // namespace dm::manager
