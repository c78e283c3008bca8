#include "manager/rules/claims.h"

#include "kube/objects.h"

namespace dm::manager {

using Json = nlohmann::json;
std::vector<std::string> claim_names(const Json& pod) {
  std::vector<std::string> out;
  for (const auto& claim : kube::pod_resource_claims(pod)) {
    // A template-generated claim's name is only known from the pod status ("" until generated).
    std::string name = kube::resolved_claim_name(pod, claim);
    if (!name.empty()) out.push_back(std::move(name));
  }
  return out;
}

std::string nvidia_claim_driver(const Json& claim) {
  const Json* results = kube::find(claim, {"status", "allocation", "devices", "results"});
  if (results == nullptr || !results->is_array()) return "";
  std::string out;
  for (const auto& r : *results) {
    std::string driver = kube::string_at(r, {"driver"});
    if (driver == kGpuDraDriver) return driver;
    if (driver == kComputeDomainDraDriver) out = driver;
  }
  return out;
}

bool is_allocated_gpu_claim(const Json& claim) {
  return !nvidia_claim_driver(claim).empty();
}

std::vector<const Json*> gpu_claims_of(const Json& pod, const std::vector<Json>& claims) {
  std::vector<const Json*> out;
  const std::string ns = kube::namespace_of(pod);
  for (const auto& name : claim_names(pod)) {
    for (const auto& claim : claims) {
      if (kube::namespace_of(claim) == ns && kube::name(claim) == name && is_allocated_gpu_claim(claim)) {
        out.push_back(&claim);
      }
    }
  }
  return out;
}

ClaimHold claim_hold(const Json& pod, const Json& claim) {
  return {.pod = kube::ref_string(pod),
          .claim = kube::ref_string(claim),
          .uid = kube::string_at(claim, {"metadata", "uid"}),
          .driver = nvidia_claim_driver(claim)};
}

}  // namespace dm::manager
