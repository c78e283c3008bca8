// The gpu-client taint on JSON: parse `key[=value]:effect` and add/remove it in a spec.taints array (the
// Taint itself and toleration matching are in kube/objects.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"
#include "kube/objects.h"

namespace dm::manager {

using Json = nlohmann::json;

// The default GPU-client taint: the key every GPU Operator DaemonSet, the driver's included, tolerates by
// default, so the driver pod is recreated if deleted while it is on and the operator's upgrade controller
// keeps counting the node (docs/gpu-clients.md, "Which taint").
inline constexpr std::string_view kDefaultGpuClientTaint = "nvidia.com/gpu:NoSchedule";

using kube::Taint;

// Parses `key[=value]:effect` with Kubernetes' validation (key: qualified name, value: label value,
// effect: NoSchedule|PreferNoSchedule|NoExecute). Errors quote the input and say what is wrong.
Result<Taint> parse_taint(std::string_view spec);

// True if `taints` (a spec.taints array, or null) has an entry with the same key and effect (the API
// server refuses a second one).
bool has_taint_key_effect(const Json& taints, const Taint& taint);
// True if `taints` has an entry with the same key, value and effect.
bool has_exact_taint(const Json& taints, const Taint& taint);
// `taints` with `taint` appended, unless an entry with the same key and effect is already there.
Json with_taint(const Json& taints, const Taint& taint);
// `taints` without entries equal to `taint` in key, value and effect (others kept, order preserved).
Json without_taint(const Json& taints, const Taint& taint);

}  // namespace dm::manager
