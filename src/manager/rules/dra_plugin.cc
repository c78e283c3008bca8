#include "manager/rules/dra_plugin.h"

#include <algorithm>

#include "kube/objects.h"
#include "manager/rules/claims.h"

namespace dm::manager {

using Json = nlohmann::json;

std::optional<std::string> dra_chart_plugin_label(const Json& pod) {
  std::vector<std::string> names;
  if (auto n = kube::label(pod, "app.kubernetes.io/name"); n && !n->empty()) names.push_back(*n);
  for (const auto name : kDraChartNames) names.emplace_back(name);
  for (const auto& name : names) {
    if (name.find("nvidia") == std::string::npos) continue;
    const std::string key = name + "-component";
    if (kube::label(pod, key) == std::string(kDraChartPluginComponent)) {
      return key + "=" + std::string(kDraChartPluginComponent);
    }
  }
  return std::nullopt;
}

bool is_gpu_slice_of_node(const Json& slice, std::string_view node) {
  return kube::string_at(slice, {"spec", "driver"}) == kGpuDraDriver &&
         kube::string_at(slice, {"spec", "nodeName"}) == node;
}

namespace {

std::string first_of(const std::vector<std::string>& names) {
  std::string out = names.front();
  if (names.size() > 1) out += " and " + std::to_string(names.size() - 1) + " more";
  return out;
}

}  // namespace

std::string dra_in_use_reason(const DraEvidence& e) {
  if (e.operator_label)
    return "the GPU Operator deploys its DRA driver here (nvidia.com/gpu.deploy.dra-driver)";
  if (e.gpu_slices > 0) {
    return "the node has " + std::to_string(e.gpu_slices) + " " + std::string(kGpuDraDriver) +
           " ResourceSlice" + (e.gpu_slices == 1 ? "" : "s");
  }
  if (!e.plugins.empty()) return "the NVIDIA DRA kubelet plugin runs here (" + first_of(e.plugins) + ")";
  if (!e.claimants.empty()) return "pods hold allocated GPU claims here (" + first_of(e.claimants) + ")";
  return "";
}

void add_pod_dra_evidence(const Json& pod, const PodFacts& facts, DraEvidence& e) {
  if (kube::pod_finished(pod)) return;
  if (dra_chart_plugin_label(pod)) e.plugins.push_back(kube::ref_string(pod));
  if (!facts.holds_gpu_claim || claim_names(pod).empty()) return;
  if (auto held = facts.holds_gpu_claim(pod); held && *held) e.claimants.push_back(kube::ref_string(pod));
}

}  // namespace dm::manager
