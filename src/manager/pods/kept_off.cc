#include "manager/pods/kept_off.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "manager/pods/gpu_clients.h"
#include "manager/rules/taints.h"

namespace dm::manager {

using Json = nlohmann::json;

std::optional<kube::Taint> taint_in_force(const Settings& settings, const Json& node) {
  auto configured = parse_taint(settings.gpu_client_taint);
  if (!configured) return std::nullopt;
  const Json& taints = node.contains("spec") ? node["spec"].value("taints", Json::array()) : Json::array();
  for (const auto& t : taints) {
    if (t.value("key", "") == configured->key && t.value("effect", "") == configured->effect) {
      return kube::Taint{configured->key, t.value("value", ""), configured->effect};
    }
  }
  return *configured;
}

std::vector<std::string> clients_nothing_keeps_off(const Settings& settings, const Json& node,
                                                   const PodSnapshot& pods,
                                                   const std::shared_ptr<const LabelPause>& label_pause) {
  std::vector<std::string> out;
  const auto taint = taint_in_force(settings, node);
  if (!taint) return out;
  for (const auto phase : {GpuClientPhase::kWithOperands, GpuClientPhase::kDraPlugin}) {
    const PodListDecision decision =
        decide_pods(gpu_client_pipeline_for(settings, phase, *taint, label_pause), pods);
    for (const auto& pod : decision.to_evict) {
      const auto ref = kube::controller_ref(pod);
      if (!ref || ref->kind != "DaemonSet") continue;  // the cordon keeps a scheduler-placed pod off
      if (!kube::tolerates(kube::pod_tolerations(pod), *taint)) continue;
      out.push_back(kube::ref_string(pod) + " (DaemonSet " + ref->name + ", tolerates " + taint->to_string() +
                    ")");
    }
  }
  return out;
}

void warn_clients_nothing_keeps_off(const std::string& node_name, const std::vector<std::string>& pods) {
  if (pods.empty()) return;
  spdlog::warn(
      "Nothing keeps these GPU clients off node {} once they are evicted: {}. Their DaemonSet recreates them "
      "at once (a cordon does not stop a DaemonSet, and the taint is tolerated), so they hold the GPU at the "
      "unload. Fix: have the DaemonSet select nvidia.com/gpu.deploy.client in its nodeSelector (the label "
      "pause then takes it off), or set GPU_CLIENT_TAINT to a key it does not tolerate (and add that key to "
      "ClusterPolicy daemonsets.tolerations, keeping nvidia.com/gpu there)",
      node_name, fmt::format("{}", fmt::join(pods, ", ")));
}

}  // namespace dm::manager
