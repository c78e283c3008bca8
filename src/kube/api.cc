#include "kube/api.h"

#include "kube/objects.h"

namespace dm::kube {

using Json = nlohmann::json;

Result<Json> event_object(const Json& involved_object, const std::string& reason, const std::string& message,
                          const std::string& type, const std::string& component, const std::string& now) {
  const bool full = involved_object.contains("metadata");
  const auto field = [&](const char* k) {
    return full ? string_at(involved_object, {"metadata", k}) : string_at(involved_object, {k});
  };
  const std::string name = field("name");
  if (name.empty()) return Error("cannot create event " + reason + ": the involved object has no name");
  const std::string obj_ns = field("namespace");
  const std::string ns = obj_ns.empty() ? "default" : obj_ns;  // cluster-scoped objects: like the kubelet
  Json ref = {{"kind", involved_object.value("kind", "")},
              {"apiVersion", involved_object.value("apiVersion", "")},
              {"name", name}};
  if (!obj_ns.empty()) ref["namespace"] = obj_ns;
  if (const std::string uid = field("uid"); !uid.empty()) ref["uid"] = uid;
  if (const std::string rv = field("resourceVersion"); !rv.empty()) ref["resourceVersion"] = rv;
  return Json{{"apiVersion", "v1"},
              {"kind", "Event"},
              {"metadata", {{"generateName", name + "."}, {"namespace", ns}}},
              {"involvedObject", ref},
              {"reason", reason},
              {"message", message},
              {"type", type},
              {"source", {{"component", component}}},
              {"reportingComponent", component},
              {"firstTimestamp", now},
              {"lastTimestamp", now},
              {"count", 1}};
}

namespace paths {
std::string nodes() {
  return "/api/v1/nodes";
}
std::string node(const std::string& name) {
  return "/api/v1/nodes/" + name;
}
std::string pods(const std::string& ns) {
  return ns.empty() ? "/api/v1/pods" : "/api/v1/namespaces/" + ns + "/pods";
}
std::string pod(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/pods/" + name;
}
std::string daemonset(const std::string& ns, const std::string& name) {
  return "/apis/apps/v1/namespaces/" + ns + "/daemonsets/" + name;
}
std::string resource_claim(const std::string& ns, const std::string& name) {
  return "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name;
}
std::string runtime_class(const std::string& name) {
  return "/apis/node.k8s.io/v1/runtimeclasses/" + name;
}
std::string pod_disruption_budgets(const std::string& version) {
  return "/apis/policy/" + version + "/poddisruptionbudgets";
}
}  // namespace paths

}  // namespace dm::kube
