// Typed read-only views over pod and node JSON: free functions over const Json&. Missing or mistyped fields
// read as empty (the API server is trusted to send well-formed objects; a default is the safe reading).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dm::kube {

using Json = nlohmann::json;

// The value at `path` (object keys), or nullptr.
const Json* find(const Json& j, std::initializer_list<std::string_view> path);
// The string at `path`, or `fallback` when absent or not a string.
std::string string_at(const Json& j, std::initializer_list<std::string_view> path, std::string fallback = {});

// ---- metadata (any object) ----
std::string name(const Json& obj);
std::string namespace_of(const Json& obj);  // "" for cluster-scoped objects
std::string uid(const Json& obj);
std::string resource_version(const Json& obj);
// "namespace/name" (or "name" when cluster-scoped), for log lines.
std::string ref_string(const Json& obj);
std::map<std::string, std::string> labels(const Json& obj);
std::map<std::string, std::string> annotations(const Json& obj);
std::optional<std::string> label(const Json& obj, std::string_view key);
std::optional<std::string> annotation(const Json& obj, std::string_view key);
// metadata.deletionTimestamp is set: the object is being deleted.
bool terminating(const Json& obj);

struct OwnerRef {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
};
std::vector<OwnerRef> owner_refs(const Json& obj);
// The ownerReference with controller: true, if any.
std::optional<OwnerRef> controller_ref(const Json& obj);

// ---- pods ----
std::string pod_node_name(const Json& pod);  // spec.nodeName
std::string pod_phase(const Json& pod);      // status.phase ("Pending" when absent)
// Phase Succeeded or Failed: the pod's containers will not run again.
bool pod_finished(const Json& pod);
// The Ready condition is True.
bool pod_ready(const Json& pod);
// A static pod's mirror (annotation kubernetes.io/config.mirror): the API cannot delete or evict it.
bool pod_is_mirror(const Json& pod);
// The grace period the pod gets when deleted: metadata.deletionGracePeriodSeconds once terminating, else
// spec.terminationGracePeriodSeconds (default 30).
int64_t pod_grace_period_seconds(const Json& pod);
std::map<std::string, std::string> pod_node_selector(const Json& pod);

struct Toleration {
  std::string key;
  std::string op = "Equal";  // "Equal" or "Exists"
  std::string value;
  std::string effect;  // "" = every effect
  std::optional<int64_t> toleration_seconds;
};
std::vector<Toleration> pod_tolerations(const Json& pod);

// Names of the resources requested or limited by any container or init container (e.g. "nvidia.com/gpu").
std::set<std::string> pod_resource_names(const Json& pod);

struct PodResourceClaim {
  std::string name;                          // the name inside the pod
  std::string resource_claim_name;           // an existing ResourceClaim
  std::string resource_claim_template_name;  // a claim generated per pod from a template
};
// spec.resourceClaims (both the 1.26-1.27 `source:` form and the flat 1.28+ form).
std::vector<PodResourceClaim> pod_resource_claims(const Json& pod);
// status.resourceClaimStatuses: pod claim name -> generated ResourceClaim name.
std::map<std::string, std::string> pod_resource_claim_statuses(const Json& pod);
// The ResourceClaim object a pod claim refers to; "" when a template's claim has not been generated yet.
std::string resolved_claim_name(const Json& pod, const PodResourceClaim& claim);

// ---- nodes ----
bool node_unschedulable(const Json& node);  // spec.unschedulable
bool node_ready(const Json& node);          // the Ready condition is True

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  friend bool operator==(const Taint&, const Taint&) = default;
};
std::vector<Taint> node_taints(const Json& node);
Json to_json(const Taint& taint);

// Kubernetes' toleration matching: effect (empty tolerates all), key (empty with Exists tolerates all
// keys), operator Exists or Equal (value must match).
bool tolerates(const Toleration& toleration, const Taint& taint);
bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint);

}  // namespace dm::kube
