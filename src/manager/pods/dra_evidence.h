// Whether DRA is in use on this node, whatever installed the driver (docs/behaviour.md, DRA claims): read
// from the node's gpu.nvidia.com ResourceSlices (when they may be listed), the node's pods (the DRA driver
// chart's kubelet plugin) and their allocated GPU claims, beside the operator's own dra-driver label.
#pragma once

#include <string>

#include "kube/api.h"
#include "manager/rules/dra_plugin.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

// The ResourceSlices path (resource.k8s.io/v1, cluster-scoped).
inline constexpr std::string_view kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";

// The node's gpu.nvidia.com ResourceSlices: one LIST (field selector spec.nodeName). A refusal (the GPU
// Operator's stock role has no resourceslices) or an API without them is said at debug level and counts
// none: the pods still tell.
size_t read_gpu_slice_count(kube::Api& client, const std::string& node);

// The evidence: read_gpu_slice_count and add_pod_dra_evidence for each pod.
DraEvidence read_dra_evidence(kube::Api& client, const std::string& node, bool operator_label,
                              const PodSnapshot& pods, const PodFacts& facts);

// Logs why DRA counts as in use (info) when the operator's label is not the reason; returns the reason.
std::string log_dra_in_use(const std::string& node, const DraEvidence& evidence);

}  // namespace dm::manager
