// The one model of pod and node JSON for driver-manager and node-sim: typed read-only views as free functions
// over const nlohmann::json&. Missing or mistyped fields read as empty (the API server is trusted to send
// well-formed objects; a default is the safe reading). Rules about pods (which to evict, which hold a GPU)
// are built on these views elsewhere; nothing else reads pod or node JSON field by field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dm::kube {

// The value at `path` (object keys), or nullptr.
const nlohmann::json* find(const nlohmann::json& j, std::initializer_list<std::string_view> path);
// The string at `path` in place, or nullptr when absent or not a string (no copy: for checks that run on
// every cache change).
const std::string* find_string(const nlohmann::json& j, std::initializer_list<std::string_view> path);
// The string at `path`, or `fallback` when absent or not a string.
std::string string_at(const nlohmann::json& j, std::initializer_list<std::string_view> path,
                      std::string fallback = {});

// ---- metadata (any object) ----
std::string name(const nlohmann::json& obj);
std::string namespace_of(const nlohmann::json& obj);  // "" for cluster-scoped objects
std::string uid(const nlohmann::json& obj);
std::string resource_version(const nlohmann::json& obj);
// "namespace/name" (or "name" when cluster-scoped), for log lines.
std::string ref_string(const nlohmann::json& obj);
std::map<std::string, std::string> labels(const nlohmann::json& obj);
std::map<std::string, std::string> annotations(const nlohmann::json& obj);
std::optional<std::string> label(const nlohmann::json& obj, std::string_view key);
std::optional<std::string> annotation(const nlohmann::json& obj, std::string_view key);
// metadata.deletionTimestamp is set: the object is being deleted.
bool terminating(const nlohmann::json& obj);

struct OwnerRef {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
};
std::vector<OwnerRef> owner_refs(const nlohmann::json& obj);
// The ownerReference with controller: true, if any.
std::optional<OwnerRef> controller_ref(const nlohmann::json& obj);

// ---- pods ----
std::string pod_node_name(const nlohmann::json& pod);  // spec.nodeName
std::string pod_phase(const nlohmann::json& pod);      // status.phase ("Pending" when absent)
// Phase Succeeded or Failed: the pod's containers will not run again.
bool pod_finished(const nlohmann::json& pod);
// Some volume of spec.volumes is an emptyDir (its data is lost when the pod is deleted).
bool pod_has_emptydir_volume(const nlohmann::json& pod);
// Its controller (ownerReference with controller: true) is of kind `kind` (e.g. "DaemonSet").
bool controlled_by_kind(const nlohmann::json& obj, std::string_view kind);
// The Ready condition is True.
bool pod_ready(const nlohmann::json& pod);
// A static pod's mirror (annotation kubernetes.io/config.mirror): the API cannot delete or evict it.
bool pod_is_mirror(const nlohmann::json& pod);
// The grace period the pod gets when deleted: metadata.deletionGracePeriodSeconds once terminating, else
// spec.terminationGracePeriodSeconds (default 30).
int64_t pod_grace_period_seconds(const nlohmann::json& pod);
std::map<std::string, std::string> pod_node_selector(const nlohmann::json& pod);
// spec.nodeSelector holds `key` (with a string value).
bool pod_node_selector_has(const nlohmann::json& pod, std::string_view key);

struct Toleration {
  std::string key;
  std::string op = "Equal";  // "Equal" or "Exists"
  std::string value;
  std::string effect;  // "" = every effect
  std::optional<int64_t> toleration_seconds;
};
std::vector<Toleration> pod_tolerations(const nlohmann::json& pod);

// One resource a regular container (spec.containers, not init or ephemeral ones) requests or limits.
struct ContainerResource {
  std::string container;
  std::string name;      // e.g. "nvidia.com/gpu"
  std::string quantity;  // as written ("1", "0", "500m"); numbers are rendered as text
};
std::vector<ContainerResource> pod_container_resources(const nlohmann::json& pod);
// A quantity that asks for nothing ("0", "0.0", "0m", 0). An unparsable quantity is not zero.
bool quantity_is_zero(std::string_view quantity);

// Removes from a pod what none of the views here read: the heavy parts (container statuses, init and
// ephemeral containers, each container's env, mounts, command, ports, probes, lifecycle and security
// context, the service-account token's projected volume source, affinity) and the bookkeeping every pod
// carries (DNS and scheduler settings, pod and host IPs, start time, QoS class, the conditions' timestamps).
// The pod watch keeps every pod of the node this way (docs/benchmarks.md, Memory). A view that starts reading
// one of these fields must take it off the list (kube_objects_test and pod_rules_test compare every view
// and every plan on pruned and whole pods).
void drop_unread_pod_fields(nlohmann::json& pod);

// ---- NVIDIA GPU resources ----
// The resource names of NVIDIA GPUs: nvidia.com/gpu* (so nvidia.com/gpu.shared too) and nvidia.com/mig-*.
bool is_gpu_resource_name(std::string_view name);
// Two rules on purpose, both over pod_container_resources:
// The pod declares a GPU resource (any quantity): what driver-manager treats as a GPU workload, as upstream
// does (the name is enough; init containers have finished before the pod runs).
bool pod_declares_gpu_resource(const nlohmann::json& pod);
// The device plugin hands the pod a device: a non-zero quantity of a GPU resource. What node-sim's simulated
// kubelet uses to decide who opens the device; a zero request declares a GPU without getting one.
bool pod_is_allocated_gpu(const nlohmann::json& pod);

// The environment variable through which the NVIDIA container runtime hands a container its GPUs.
inline constexpr std::string_view kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";
// spec.runtimeClassName ("" when none).
std::string pod_runtime_class_name(const nlohmann::json& pod);
// The literal values (env[].value) of the environment variable `name` in the regular containers, one per
// container that sets it (a value from a ConfigMap or Secret is not known and not listed).
std::vector<std::string> container_env_values(const nlohmann::json& pod, std::string_view name);

struct PodResourceClaim {
  std::string name;                          // the name inside the pod
  std::string resource_claim_name;           // an existing ResourceClaim
  std::string resource_claim_template_name;  // a claim generated per pod from a template
};
// spec.resourceClaims (both the 1.26-1.27 `source:` form and the flat 1.28+ form).
std::vector<PodResourceClaim> pod_resource_claims(const nlohmann::json& pod);
// status.resourceClaimStatuses: pod claim name -> generated ResourceClaim name.
std::map<std::string, std::string> pod_resource_claim_statuses(const nlohmann::json& pod);
// The ResourceClaim object a pod claim refers to; "" when a template's claim has not been generated yet.
std::string resolved_claim_name(const nlohmann::json& pod, const PodResourceClaim& claim);

// ---- nodes ----
bool node_unschedulable(const nlohmann::json& node);  // spec.unschedulable
bool node_ready(const nlohmann::json& node);          // the Ready condition is True

struct Taint {
  std::string key;
  std::string value;   // may be empty
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  // {"key":..,"value":..(omitted if empty),"effect":..}
  [[nodiscard]] nlohmann::json to_json() const;
  // key[=value]:effect
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Taint&, const Taint&) = default;
};
// One element of spec.taints.
Taint taint_from_json(const nlohmann::json& taint);
std::vector<Taint> node_taints(const nlohmann::json& node);

// Kubernetes' toleration matching (core/v1 Toleration.ToleratesTaint): an empty effect tolerates every
// effect, an empty key every key; operator Exists ignores the value, Equal (or empty) compares it.
bool tolerates(const Toleration& toleration, const Taint& taint);
bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint);

}  // namespace dm::kube
