#include "pod_rules.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "kube/objects.h"

namespace nodesim {

using Json = nlohmann::json;
namespace {

// Annotation value, or "" if absent.
std::string annotation(const Json& pod, const char* key) {
  return dm::kube::annotation(pod, key).value_or("");
}

bool condition_true(const Json& pod, const std::string& type) {
  const auto& status = pod.value("status", Json::object());
  for (const auto& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

}  // namespace

std::string pod_key(const Json& pod) {
  return dm::kube::ref_string(pod);
}

bool holds_gpu(const Json& pod, bool gpu_claim) {
  if (gpu_claim) return true;
  if (go_true(annotation(pod, kGpuClientAnnotation)) || go_true(annotation(pod, kHoldsGpuAnnotation))) {
    return true;
  }
  return dm::kube::pod_is_allocated_gpu(pod);
}

bool loads_driver(const Json& pod) {
  if (go_true(annotation(pod, kLoadsDriverAnnotation))) return true;
  const Json& labels = pod.value("metadata", Json::object()).value("labels", Json::object());
  return labels.is_object() && labels.value(kDriverComponentLabel, "") == kDriverComponentValue;
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

bool is_running(const Json& pod) {
  return pod.value("status", Json::object()).value("phase", "") == "Running";
}

bool needs_start(const Json& pod) {
  if (dm::kube::terminating(pod)) return false;
  const std::string phase = pod.value("status", Json::object()).value("phase", "");
  if (phase == "Succeeded" || phase == "Failed") return false;
  return phase != "Running" || !condition_true(pod, "Ready");
}

std::optional<double> termination_delay_seconds(const Json& pod, std::string* warning) {
  if (go_true(annotation(pod, kStuckAnnotation))) return std::nullopt;
  if (const auto value = dm::kube::annotation(pod, kTerminateAfterAnnotation)) {
    const std::string& s = *value;
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
