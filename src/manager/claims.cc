#include "manager/claims.h"

namespace dm::manager {
namespace {

std::string str(const Json& j, const char* field) {
  if (!j.is_object() || !j.contains(field) || !j[field].is_string()) return {};
  return j[field].get<std::string>();
}

const Json* path(const Json& j, std::initializer_list<const char*> fields) {
  const Json* cur = &j;
  for (const char* f : fields) {
    if (!cur->is_object() || !cur->contains(f)) return nullptr;
    cur = &(*cur)[f];
  }
  return cur;
}

}  // namespace

std::vector<std::string> claim_names(const Json& pod) {
  std::vector<std::string> out;
  const Json* refs = path(pod, {"spec", "resourceClaims"});
  if (refs == nullptr || !refs->is_array()) return out;
  const Json* statuses = path(pod, {"status", "resourceClaimStatuses"});
  for (const auto& ref : *refs) {
    std::string name = str(ref, "resourceClaimName");
    if (name.empty()) {
      // Template-generated claim: its name is only known from the pod status.
      const std::string entry = str(ref, "name");
      if (statuses != nullptr && statuses->is_array()) {
        for (const auto& st : *statuses) {
          if (str(st, "name") == entry) {
            name = str(st, "resourceClaimName");
            break;
          }
        }
      }
    }
    if (!name.empty()) out.push_back(std::move(name));
  }
  return out;
}

bool is_allocated_gpu_claim(const Json& claim) {
  const Json* allocation = path(claim, {"status", "allocation"});
  if (allocation == nullptr || allocation->is_null()) return false;
  const Json* results = path(*allocation, {"devices", "results"});
  if (results == nullptr || !results->is_array()) return false;
  for (const auto& r : *results) {
    if (str(r, "driver") == kGpuDraDriver) return true;
  }
  return false;
}

}  // namespace dm::manager
