#include "pod_rules.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace nodesim {
namespace {

// Annotation value, or "" if absent.
std::string annotation(const Json& pod, const char* key) {
  const auto& meta = pod.value("metadata", Json::object());
  const auto& ann = meta.value("annotations", Json::object());
  auto it = ann.find(key);
  if (it == ann.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

bool has_annotation(const Json& pod, const char* key) {
  const auto& meta = pod.value("metadata", Json::object());
  const auto& ann = meta.value("annotations", Json::object());
  return ann.contains(key);
}

bool gpu_resource_name(const std::string& name) {
  return name.starts_with("nvidia.com/gpu") || name.starts_with("nvidia.com/mig-");
}

// A quantity of zero ("0", "0.0", "0m") requests nothing.
bool nonzero_quantity(const Json& q) {
  if (q.is_number()) return q.get<double>() != 0;
  if (!q.is_string()) return false;
  const std::string s = q.get<std::string>();
  const char* begin = s.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin) return true;  // unparsable: be conservative, a kubelet would not have admitted it
  return v != 0;
}

bool requests_gpu(const Json& container) {
  const auto& res = container.value("resources", Json::object());
  for (const char* kind : {"requests", "limits"}) {
    const auto& m = res.value(kind, Json::object());
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (gpu_resource_name(it.key()) && nonzero_quantity(it.value())) return true;
    }
  }
  return false;
}

bool condition_true(const Json& pod, const std::string& type) {
  const auto& status = pod.value("status", Json::object());
  for (const auto& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

}  // namespace

bool go_true(std::string_view s) {
  return s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True";
}

std::string pod_key(const Json& pod) {
  const auto& meta = pod.value("metadata", Json::object());
  return meta.value("namespace", "") + "/" + meta.value("name", "");
}

bool holds_gpu(const Json& pod) {
  if (go_true(annotation(pod, kGpuClientAnnotation)) || go_true(annotation(pod, kHoldsGpuAnnotation))) {
    return true;
  }
  const auto& spec = pod.value("spec", Json::object());
  for (const auto& c : spec.value("containers", Json::array())) {
    if (requests_gpu(c)) return true;
  }
  return false;
}

bool loads_driver(const Json& pod) {
  return go_true(annotation(pod, kLoadsDriverAnnotation));
}

namespace {
bool container_running(const Json& status) {
  const auto& state = status.value("state", Json::object());
  return state.contains("running") && state["running"].is_object();
}
}  // namespace

bool has_running_container(const Json& pod) {
  const auto& status = pod.value("status", Json::object());
  const std::string phase = status.value("phase", "");
  if (phase == "Succeeded" || phase == "Failed") return false;
  for (const auto& c : status.value("containerStatuses", Json::array())) {
    if (container_running(c)) return true;
  }
  return false;
}

bool all_containers_running(const Json& pod) {
  const auto& spec = pod.value("spec", Json::object());
  const auto& statuses = pod.value("status", Json::object()).value("containerStatuses", Json::array());
  const auto& containers = spec.value("containers", Json::array());
  if (containers.empty()) return false;
  for (const auto& c : containers) {
    const std::string name = c.value("name", "");
    bool running = false;
    for (const auto& s : statuses) {
      if (s.value("name", "") == name) running = container_running(s);
    }
    if (!running) return false;
  }
  return true;
}

std::optional<std::string> driver_config_digest(const Json& pod) {
  const auto& spec = pod.value("spec", Json::object());
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : spec.value(list, Json::array())) {
      for (const auto& e : c.value("env", Json::array())) {
        if (e.value("name", "") == "DRIVER_CONFIG_DIGEST" && e.contains("value") && e["value"].is_string()) {
          return e["value"].get<std::string>();
        }
      }
    }
  }
  return std::nullopt;
}

bool is_terminating(const Json& pod) {
  const auto& meta = pod.value("metadata", Json::object());
  auto it = meta.find("deletionTimestamp");
  return it != meta.end() && !it->is_null();
}

bool is_running(const Json& pod) {
  return pod.value("status", Json::object()).value("phase", "") == "Running";
}

bool needs_start(const Json& pod) {
  if (is_terminating(pod)) return false;
  const std::string phase = pod.value("status", Json::object()).value("phase", "");
  if (phase == "Succeeded" || phase == "Failed") return false;
  return phase != "Running" || !condition_true(pod, "Ready");
}

std::optional<double> termination_delay_seconds(const Json& pod, std::string* warning) {
  if (go_true(annotation(pod, kStuckAnnotation))) return std::nullopt;
  if (has_annotation(pod, kTerminateAfterAnnotation)) {
    const std::string s = annotation(pod, kTerminateAfterAnnotation);
    const char* begin = s.c_str();
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(begin, &end);
    if (end != begin && *end == '\0' && errno == 0 && std::isfinite(v) && v >= 0) return v;
    if (warning != nullptr) {
      *warning = "pod " + pod_key(pod) + ": annotation " + kTerminateAfterAnnotation + "=\"" + s +
                 "\" is not a non-negative number of seconds; using the pod's grace period instead";
    }
  }
  const auto& meta = pod.value("metadata", Json::object());
  auto it = meta.find("deletionGracePeriodSeconds");
  if (it != meta.end() && it->is_number()) return std::max(0.0, it->get<double>());
  return 0.0;
}

Json running_status_patch(const Json& pod, const std::string& now, const std::string& host_ip,
                          const std::string& pod_ip) {
  const auto& spec = pod.value("spec", Json::object());
  Json containers = Json::array();
  for (const auto& c : spec.value("containers", Json::array())) {
    containers.push_back({{"name", c.value("name", "")},
                          {"image", c.value("image", "")},
                          {"imageID", ""},
                          {"containerID", "node-sim://" + c.value("name", "")},
                          {"ready", true},
                          {"started", true},
                          {"restartCount", 0},
                          {"state", {{"running", {{"startedAt", now}}}}}});
  }
  Json init = Json::array();
  for (const auto& c : spec.value("initContainers", Json::array())) {
    init.push_back(
        {{"name", c.value("name", "")},
         {"image", c.value("image", "")},
         {"imageID", ""},
         {"ready", true},
         {"restartCount", 0},
         {"state",
          {{"terminated",
            {{"exitCode", 0}, {"reason", "Completed"}, {"startedAt", now}, {"finishedAt", now}}}}}});
  }
  Json conditions = Json::array();
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    conditions.push_back(
        {{"type", type}, {"status", "True"}, {"lastProbeTime", nullptr}, {"lastTransitionTime", now}});
  }
  Json status = {{"phase", "Running"},
                 {"hostIP", host_ip},
                 {"podIP", pod_ip},
                 {"podIPs", Json::array({{{"ip", pod_ip}}})},
                 {"startTime", now},
                 {"conditions", conditions},
                 {"containerStatuses", containers}};
  if (!init.empty()) status["initContainerStatuses"] = init;
  return {{"status", status}};
}

}  // namespace nodesim
