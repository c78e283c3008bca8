// DRA ResourceClaims on JSON (docs/behaviour.md, DRA claims): which claims a pod references, and whether a
// claim is an allocated claim of NVIDIA's DRA drivers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dm::manager {

// DRA driver name of NVIDIA GPU claims.
inline constexpr std::string_view kGpuDraDriver = "gpu.nvidia.com";
// DRA driver name of NVIDIA ComputeDomain claims: a workload's IMEX channels (/dev/nvidia-caps-imex-channels,
// devices of the nvidia module) and the ComputeDomain daemon's own claim. They count like GPU claims.
inline constexpr std::string_view kComputeDomainDraDriver = "compute-domain.nvidia.com";

// The allocated devices' driver of `claim` that is one of NVIDIA's (gpu.nvidia.com first), "" = none.
std::string nvidia_claim_driver(const nlohmann::json& claim);

// Names of the ResourceClaims (in the pod's namespace) a pod references: resourceClaimName if set, else
// the status.resourceClaimStatuses entry of the same name (template-generated); unresolved ones skipped.
std::vector<std::string> claim_names(const nlohmann::json& pod);

// True if the claim has status.allocation and any status.allocation.devices.results[].driver is
// gpu.nvidia.com or compute-domain.nvidia.com (admin-access claims included): a "GPU claim" to the rules.
bool is_allocated_gpu_claim(const nlohmann::json& claim);

// The allocated GPU claims (is_allocated_gpu_claim) among `claims` (a list's items, any namespace) that
// `pod` references.
std::vector<const nlohmann::json*> gpu_claims_of(const nlohmann::json& pod,
                                                 const std::vector<nlohmann::json>& claims);

// A pod holding an allocated claim of NVIDIA's DRA drivers, as the run or `plan` read it.
struct ClaimHold {
  std::string pod;     // ns/name of the holder
  std::string claim;   // ns/name of the claim
  std::string uid;     // the claim's UID
  std::string driver;  // nvidia_claim_driver(claim)
};
ClaimHold claim_hold(const nlohmann::json& pod, const nlohmann::json& claim);

}  // namespace dm::manager
