// Pod JSON as the flow reads it (kube/objects: metadata, owners, phase, volumes, tolerations, resources,
// resource claims; manager/claims), parsed the way API responses are.
#include "fuzz_support.h"
#include "kube/client_impl.h"
#include "kube/objects.h"
#include "manager/rules/claims.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace k = dm::kube;
  nlohmann::json pod = k::parse_response(dm::fuzz::text(data, size));
  if (pod.is_discarded()) return 0;
  (void)k::ref_string(pod);
  (void)k::uid(pod);
  (void)k::resource_version(pod);
  (void)k::labels(pod);
  (void)k::annotation(pod, "nvidia.com/gpu.client");
  (void)k::terminating(pod);
  (void)k::controller_ref(pod);
  (void)k::pod_node_name(pod);
  (void)k::pod_finished(pod);
  (void)k::pod_has_emptydir_volume(pod);
  (void)k::controlled_by_kind(pod, "DaemonSet");
  (void)k::pod_ready(pod);
  (void)k::pod_is_mirror(pod);
  (void)k::pod_grace_period_seconds(pod);
  (void)k::pod_node_selector_has(pod, "nvidia.com/gpu.deploy.client");
  const auto tolerations = k::pod_tolerations(pod);
  (void)k::tolerates(tolerations, k::Taint{"nvidia.com/gpu", "", "NoSchedule"});
  for (const auto& r : k::pod_container_resources(pod)) (void)k::quantity_is_zero(r.quantity);
  (void)k::pod_declares_gpu_resource(pod);
  (void)k::pod_is_allocated_gpu(pod);
  for (const auto& claim : k::pod_resource_claims(pod)) (void)k::resolved_claim_name(pod, claim);
  (void)dm::manager::claim_names(pod);
  (void)dm::manager::is_allocated_gpu_claim(pod);
  // The pruned pod the pod watch keeps must read the same.
  nlohmann::json pruned = pod;
  k::drop_unread_pod_fields(pruned);
  if (k::pod_declares_gpu_resource(pruned) != k::pod_declares_gpu_resource(pod) ||
      k::pod_tolerations(pruned).size() != tolerations.size() || k::pod_phase(pruned) != k::pod_phase(pod))
    dm::fuzz::fail("the pruned pod reads differently");
  return 0;
}
