#include "kube/objects.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace dm::kube {

using Json = nlohmann::json;
namespace {

std::map<std::string, std::string> string_map(const Json* j) {
  std::map<std::string, std::string> m;
  if (j == nullptr || !j->is_object()) return m;
  for (const auto& [k, v] : j->items()) {
    if (v.is_string()) m.emplace(k, v.get<std::string>());
  }
  return m;
}

std::optional<std::string> map_value(const Json* j, std::string_view key) {
  if (j == nullptr || !j->is_object()) return std::nullopt;
  const auto it = j->find(key);
  if (it == j->end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

const Json& array_or_empty(const Json* j) {
  static const Json kEmpty = Json::array();
  return j != nullptr && j->is_array() ? *j : kEmpty;
}

bool condition_true(const Json& obj, std::string_view type) {
  for (const auto& c : array_or_empty(find(obj, {"status", "conditions"}))) {
    if (string_at(c, {"type"}) == type) return string_at(c, {"status"}) == "True";
  }
  return false;
}

}  // namespace

const Json* find(const Json& j, std::initializer_list<std::string_view> path) {
  const Json* p = &j;
  for (const auto key : path) {
    if (!p->is_object()) return nullptr;
    const auto it = p->find(key);
    if (it == p->end()) return nullptr;
    p = &*it;
  }
  return p;
}

const std::string* find_string(const Json& j, std::initializer_list<std::string_view> path) {
  const Json* v = find(j, path);
  return v != nullptr ? v->get_ptr<const std::string*>() : nullptr;
}

std::string string_at(const Json& j, std::initializer_list<std::string_view> path, std::string fallback) {
  const Json* v = find(j, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::move(fallback);
}

std::string name(const Json& obj) {
  return string_at(obj, {"metadata", "name"});
}
std::string namespace_of(const Json& obj) {
  return string_at(obj, {"metadata", "namespace"});
}
std::string uid(const Json& obj) {
  return string_at(obj, {"metadata", "uid"});
}
std::string resource_version(const Json& obj) {
  return string_at(obj, {"metadata", "resourceVersion"});
}

std::string ref_string(const Json& obj) {
  const std::string ns = namespace_of(obj);
  return ns.empty() ? name(obj) : ns + "/" + name(obj);
}

std::map<std::string, std::string> labels(const Json& obj) {
  return string_map(find(obj, {"metadata", "labels"}));
}
std::map<std::string, std::string> annotations(const Json& obj) {
  return string_map(find(obj, {"metadata", "annotations"}));
}
std::optional<std::string> label(const Json& obj, std::string_view key) {
  return map_value(find(obj, {"metadata", "labels"}), key);
}
std::optional<std::string> annotation(const Json& obj, std::string_view key) {
  return map_value(find(obj, {"metadata", "annotations"}), key);
}

bool terminating(const Json& obj) {
  const Json* ts = find(obj, {"metadata", "deletionTimestamp"});
  return ts != nullptr && !ts->is_null();
}

std::vector<OwnerRef> owner_refs(const Json& obj) {
  std::vector<OwnerRef> refs;
  for (const auto& r : array_or_empty(find(obj, {"metadata", "ownerReferences"}))) {
    OwnerRef o;
    o.api_version = string_at(r, {"apiVersion"});
    o.kind = string_at(r, {"kind"});
    o.name = string_at(r, {"name"});
    o.uid = string_at(r, {"uid"});
    const Json* c = find(r, {"controller"});
    o.controller = c != nullptr && c->is_boolean() && c->get<bool>();
    refs.push_back(std::move(o));
  }
  return refs;
}

std::optional<OwnerRef> controller_ref(const Json& obj) {
  for (auto& r : owner_refs(obj)) {
    if (r.controller) return r;
  }
  return std::nullopt;
}

std::string pod_node_name(const Json& pod) {
  return string_at(pod, {"spec", "nodeName"});
}
std::string pod_phase(const Json& pod) {
  return string_at(pod, {"status", "phase"}, "Pending");
}

bool pod_finished(const Json& pod) {
  const std::string phase = pod_phase(pod);
  return phase == "Succeeded" || phase == "Failed";
}

bool pod_has_emptydir_volume(const Json& pod) {
  for (const auto& v : array_or_empty(find(pod, {"spec", "volumes"}))) {
    if (v.is_object() && v.contains("emptyDir")) return true;
  }
  return false;
}

bool controlled_by_kind(const Json& obj, std::string_view kind) {
  // The same reading as controller_ref, without copying every reference: this runs on every cache change.
  for (const auto& r : array_or_empty(find(obj, {"metadata", "ownerReferences"}))) {
    const Json* c = find(r, {"controller"});
    if (c == nullptr || !c->is_boolean() || !c->get<bool>()) continue;
    const std::string* k = find_string(r, {"kind"});
    return k != nullptr && *k == kind;
  }
  return false;
}

bool pod_ready(const Json& pod) {
  return condition_true(pod, "Ready");
}

bool pod_is_mirror(const Json& pod) {
  return annotation(pod, "kubernetes.io/config.mirror").has_value();
}

int64_t pod_grace_period_seconds(const Json& pod) {
  if (terminating(pod)) {
    const Json* d = find(pod, {"metadata", "deletionGracePeriodSeconds"});
    if (d != nullptr && d->is_number_integer()) return d->get<int64_t>();
  }
  const Json* g = find(pod, {"spec", "terminationGracePeriodSeconds"});
  return g != nullptr && g->is_number_integer() ? g->get<int64_t>() : 30;
}

std::map<std::string, std::string> pod_node_selector(const Json& pod) {
  return string_map(find(pod, {"spec", "nodeSelector"}));
}
bool pod_node_selector_has(const Json& pod, std::string_view key) {
  return map_value(find(pod, {"spec", "nodeSelector"}), key).has_value();
}

std::vector<Toleration> pod_tolerations(const Json& pod) {
  std::vector<Toleration> out;
  for (const auto& t : array_or_empty(find(pod, {"spec", "tolerations"}))) {
    Toleration tol;
    tol.key = string_at(t, {"key"});
    tol.op = string_at(t, {"operator"}, "Equal");
    tol.value = string_at(t, {"value"});
    tol.effect = string_at(t, {"effect"});
    const Json* s = find(t, {"tolerationSeconds"});
    if (s != nullptr && s->is_number_integer()) tol.toleration_seconds = s->get<int64_t>();
    out.push_back(std::move(tol));
  }
  return out;
}

std::vector<ContainerResource> pod_container_resources(const Json& pod) {
  std::vector<ContainerResource> out;
  for (const auto& c : array_or_empty(find(pod, {"spec", "containers"}))) {
    const std::string container = string_at(c, {"name"});
    for (const char* kind : {"requests", "limits"}) {
      const Json* r = find(c, {"resources", kind});
      if (r == nullptr || !r->is_object()) continue;
      for (const auto& [k, v] : r->items()) {
        out.push_back({container, k, v.is_string() ? v.get<std::string>() : v.dump()});
      }
    }
  }
  return out;
}

namespace {

// Of spec.affinity only the required node affinity is read (pod placement).
void keep_required_node_affinity(Json& spec) {
  auto it = spec.find("affinity");
  if (it == spec.end()) return;
  const Json* required = find(*it, {"nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"});
  if (required == nullptr) {
    spec.erase(it);
    return;
  }
  Json kept = {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", *required}}}};
  *it = std::move(kept);
}

// Of a container's environment only the NVIDIA_VISIBLE_DEVICES entries are read.
void keep_visible_devices_env(Json& container) {
  auto it = container.find("env");
  if (it == container.end()) return;
  Json kept = Json::array();
  if (it->is_array()) {
    for (const auto& e : *it) {
      const std::string* name = e.is_object() ? find_string(e, {"name"}) : nullptr;
      if (name != nullptr && *name == kVisibleDevicesEnv) kept.push_back(e);
    }
  }
  if (kept.empty()) {
    container.erase(it);
  } else {
    *it = std::move(kept);
  }
}

}  // namespace

void drop_unread_pod_fields(Json& pod) {
  // The heavy parts first, then the scheduling and networking bookkeeping that every pod carries.
  static constexpr std::string_view kSpec[] = {"initContainers",     "ephemeralContainers", "securityContext",
                                               "dnsPolicy",          "schedulerName",       "serviceAccount",
                                               "enableServiceLinks", "preemptionPolicy"};
  static constexpr std::string_view kContainer[] = {"envFrom",
                                                    "volumeMounts",
                                                    "volumeDevices",
                                                    "command",
                                                    "args",
                                                    "ports",
                                                    "livenessProbe",
                                                    "readinessProbe",
                                                    "startupProbe",
                                                    "lifecycle",
                                                    "securityContext",
                                                    "terminationMessagePath",
                                                    "terminationMessagePolicy",
                                                    "imagePullPolicy"};
  static constexpr std::string_view kStatus[] = {"containerStatuses",
                                                 "initContainerStatuses",
                                                 "ephemeralContainerStatuses",
                                                 "hostIP",
                                                 "hostIPs",
                                                 "podIP",
                                                 "podIPs",
                                                 "startTime",
                                                 "qosClass"};
  static constexpr std::string_view kCondition[] = {"lastProbeTime", "lastTransitionTime"};
  const auto erase_all = [](Json& obj, const auto& keys) {
    if (!obj.is_object()) return;
    for (const auto key : keys) obj.erase(std::string(key));
  };
  const auto each = [](Json& obj, std::string_view key, const auto& fn) {
    if (!obj.is_object()) return;
    auto it = obj.find(std::string(key));
    if (it == obj.end() || !it->is_array()) return;
    for (auto& element : *it) {
      if (element.is_object()) fn(element);
    }
  };
  if (!pod.is_object()) return;
  if (auto spec = pod.find("spec"); spec != pod.end()) {
    erase_all(*spec, kSpec);
    keep_required_node_affinity(*spec);
    each(*spec, "containers", [&](Json& c) {
      erase_all(c, kContainer);
      keep_visible_devices_env(c);
    });
    each(*spec, "volumes", [](Json& v) { v.erase("projected"); });
  }
  if (auto status = pod.find("status"); status != pod.end()) {
    erase_all(*status, kStatus);
    each(*status, "conditions", [&](Json& c) { erase_all(c, kCondition); });
  }
}

bool quantity_is_zero(std::string_view quantity) {
  const std::string s(quantity);
  const char* begin = s.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  return end != begin && v == 0;
}

bool is_gpu_resource_name(std::string_view name) {
  return name.starts_with("nvidia.com/gpu") || name.starts_with("nvidia.com/mig-");
}

bool pod_declares_gpu_resource(const Json& pod) {
  const auto resources = pod_container_resources(pod);
  return std::any_of(resources.begin(), resources.end(),
                     [](const ContainerResource& r) { return is_gpu_resource_name(r.name); });
}

bool pod_is_allocated_gpu(const Json& pod) {
  const auto resources = pod_container_resources(pod);
  return std::any_of(resources.begin(), resources.end(), [](const ContainerResource& r) {
    return is_gpu_resource_name(r.name) && !quantity_is_zero(r.quantity);
  });
}

std::string pod_runtime_class_name(const Json& pod) {
  return string_at(pod, {"spec", "runtimeClassName"});
}

std::vector<std::string> container_env_values(const Json& pod, std::string_view name) {
  std::vector<std::string> out;
  for (const auto& c : array_or_empty(find(pod, {"spec", "containers"}))) {
    for (const auto& e : array_or_empty(find(c, {"env"}))) {
      const std::string* n = find_string(e, {"name"});
      const std::string* v = find_string(e, {"value"});
      if (n != nullptr && *n == name && v != nullptr) out.push_back(*v);
    }
  }
  return out;
}

std::vector<PodResourceClaim> pod_resource_claims(const Json& pod) {
  std::vector<PodResourceClaim> out;
  for (const auto& c : array_or_empty(find(pod, {"spec", "resourceClaims"}))) {
    PodResourceClaim rc;
    rc.name = string_at(c, {"name"});
    rc.resource_claim_name =
        string_at(c, {"resourceClaimName"}, string_at(c, {"source", "resourceClaimName"}));
    rc.resource_claim_template_name =
        string_at(c, {"resourceClaimTemplateName"}, string_at(c, {"source", "resourceClaimTemplateName"}));
    out.push_back(std::move(rc));
  }
  return out;
}

std::map<std::string, std::string> pod_resource_claim_statuses(const Json& pod) {
  std::map<std::string, std::string> out;
  for (const auto& s : array_or_empty(find(pod, {"status", "resourceClaimStatuses"}))) {
    const std::string n = string_at(s, {"name"});
    const std::string claim = string_at(s, {"resourceClaimName"});
    if (!n.empty() && !claim.empty()) out.emplace(n, claim);
  }
  return out;
}

std::string resolved_claim_name(const Json& pod, const PodResourceClaim& claim) {
  if (!claim.resource_claim_name.empty()) return claim.resource_claim_name;
  const auto statuses = pod_resource_claim_statuses(pod);
  const auto it = statuses.find(claim.name);
  return it == statuses.end() ? std::string() : it->second;
}

bool node_unschedulable(const Json& node) {
  const Json* u = find(node, {"spec", "unschedulable"});
  return u != nullptr && u->is_boolean() && u->get<bool>();
}

bool node_ready(const Json& node) {
  return condition_true(node, "Ready");
}

Json Taint::to_json() const {
  Json j = {{"key", key}, {"effect", effect}};
  if (!value.empty()) j["value"] = value;
  return j;
}

std::string Taint::to_string() const {
  return key + (value.empty() ? "" : "=" + value) + ":" + effect;
}

Taint taint_from_json(const Json& taint) {
  return Taint{string_at(taint, {"key"}), string_at(taint, {"value"}), string_at(taint, {"effect"})};
}

std::vector<Taint> node_taints(const Json& node) {
  std::vector<Taint> out;
  for (const auto& t : array_or_empty(find(node, {"spec", "taints"}))) out.push_back(taint_from_json(t));
  return out;
}

bool tolerates(const Toleration& toleration, const Taint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  if (!toleration.key.empty() && toleration.key != taint.key) return false;
  if (toleration.op.empty() || toleration.op == "Equal") return toleration.value == taint.value;
  return toleration.op == "Exists";
}

bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const Toleration& t) { return tolerates(t, taint); });
}

}  // namespace dm::kube
