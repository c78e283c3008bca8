// DRA ResourceClaims on JSON (docs/behaviour.md, DRA claims): which claims a pod references, and whether a
// claim is an allocated claim of the NVIDIA GPU DRA driver.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dm::manager {

// DRA driver name of NVIDIA GPU claims (ComputeDomain and other drivers' claims do not count).
inline constexpr std::string_view kGpuDraDriver = "gpu.nvidia.com";

// Names of the ResourceClaims (in the pod's namespace) a pod references: resourceClaimName if set, else
// the status.resourceClaimStatuses entry of the same name (template-generated); unresolved ones skipped.
std::vector<std::string> claim_names(const nlohmann::json& pod);

// True if the claim has status.allocation and any status.allocation.devices.results[].driver is
// gpu.nvidia.com (admin-access claims included).
bool is_allocated_gpu_claim(const nlohmann::json& claim);

// The allocated GPU claims (is_allocated_gpu_claim) among `claims` (a list's items, any namespace) that
// `pod` references.
std::vector<const nlohmann::json*> gpu_claims_of(const nlohmann::json& pod,
                                                 const std::vector<nlohmann::json>& claims);

}  // namespace dm::manager
