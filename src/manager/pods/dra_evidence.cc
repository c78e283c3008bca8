#include "manager/pods/dra_evidence.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dm::manager {

using Json = nlohmann::json;

size_t read_gpu_slice_count(kube::Api& client, const std::string& node) {
  kube::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node;
  auto slices = client.list_all(std::string(kResourceSlicesPath), opts);
  if (!slices) {
    spdlog::debug("Cannot list the ResourceSlices of node {} ({}): DRA in use is judged from its pods", node,
                  slices.error().message);
    return 0;
  }
  return static_cast<size_t>(std::count_if(slices->begin(), slices->end(),
                                           [&](const Json& s) { return is_gpu_slice_of_node(s, node); }));
}

DraEvidence read_dra_evidence(kube::Api& client, const std::string& node, bool operator_label,
                              const PodSnapshot& pods, const PodFacts& facts) {
  DraEvidence e;
  e.operator_label = operator_label;
  e.gpu_slices = read_gpu_slice_count(client, node);
  for (const auto& p : pods) add_pod_dra_evidence(*p, facts, e);
  return e;
}

std::string log_dra_in_use(const std::string& node, const DraEvidence& evidence) {
  std::string why = dra_in_use_reason(evidence);
  if (!why.empty() && !evidence.operator_label) {
    spdlog::info(
        "DRA is in use on node {}: {}; the DRA claim guard runs and the DRA kubelet plugin goes last", node,
        why);
  }
  return why;
}

}  // namespace dm::manager
