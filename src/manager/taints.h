// Node taints and pod tolerations on JSON (for the gpu-client taint): parse `key[=value]:effect`, add/remove
// in a spec.taints array, and Kubernetes' toleration matching.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dm::manager {

using Json = nlohmann::json;

// The default GPU-client taint: the key every GPU Operator DaemonSet, the driver's included, tolerates by
// default, so the driver pod is recreated if deleted while it is on and the operator's upgrade controller
// keeps counting the node (docs/gpu-clients.md, "Which taint").
inline constexpr std::string_view kDefaultGpuClientTaint = "nvidia.com/gpu:NoSchedule";

struct Taint {
  std::string key;
  std::string value;   // may be empty
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute

  // {"key":..,"value":..(omitted if empty),"effect":..}
  [[nodiscard]] Json to_json() const;
  // key[=value]:effect
  [[nodiscard]] std::string to_string() const;
  bool operator==(const Taint&) const = default;
};

// Parses `key[=value]:effect` with Kubernetes' validation (key: qualified name, value: label value,
// effect: NoSchedule|PreferNoSchedule|NoExecute). Errors quote the input and say what is wrong.
Result<Taint> parse_taint(std::string_view spec);

// Reads one element of spec.taints.
Taint taint_from_json(const Json& taint);

// True if `taints` (a spec.taints array, or null) has an entry with the same key and effect (the API
// server refuses a second one).
bool has_taint_key_effect(const Json& taints, const Taint& taint);
// True if `taints` has an entry with the same key, value and effect.
bool has_exact_taint(const Json& taints, const Taint& taint);
// `taints` with `taint` appended, unless an entry with the same key and effect is already there.
Json with_taint(const Json& taints, const Taint& taint);
// `taints` without entries equal to `taint` in key, value and effect (others kept, order preserved).
Json without_taint(const Json& taints, const Taint& taint);

// Does one toleration (an element of spec.tolerations) tolerate `taint`: empty effect matches all effects;
// operator Exists (or empty key with Exists: every taint) ignores the value; Equal (default) compares it.
bool toleration_tolerates(const Json& toleration, const Taint& taint);
// Does any element of `tolerations` (spec.tolerations, or null) tolerate `taint`.
bool tolerates(const Json& tolerations, const Taint& taint);

}  // namespace dm::manager
