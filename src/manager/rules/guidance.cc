#include "manager/rules/guidance.h"

#include <fmt/format.h>

namespace dm::manager {

// The two blocks below are upstream's text, character for character (tabs, blank lines, trailing newline):
// operators' runbooks and the GPU Operator's docs search the logs for them.

std::string policy_guidance(std::string_view node) {
  return fmt::format(
      "Cleanup could not automatically proceed on node {0} because the GPU driver auto-upgrade policy is "
      "enabled and upgrade-controller manages GPU workload eviction.\n"
      "\n"
      "Note: reconciliation is automatic; after any option below is applied, the system will retry without "
      "manual intervention.\n"
      "\n"
      "Cleanup guidance (choose one):\n"
      "\t[1] Manually stop workloads using GPUs on this node so that the GPUs are released.\n"
      "\t[2] Disable the GPU driver auto-upgrade policy in the GPU Operator ClusterPolicy and ensure "
      "k8s-driver-manager has ENABLE_GPU_POD_EVICTION=true (and optionally ENABLE_AUTO_DRAIN=true) so "
      "driver-manager can auto-evict GPU workloads.\n"
      "\t[3] Request upgrade-controller to auto-evict GPU workloads for this node now by running:\n"
      "\t\t\tkubectl label node {0} nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite\n"
      "\t[4] Wait for running GPU workloads to finish and release GPUs on this node.\n",
      node);
}

std::string no_eviction_guidance(std::string_view node) {
  return fmt::format(
      "Cleanup could not automatically proceed on node {0} because both GPU pod eviction and auto-drain are "
      "disabled.\n"
      "\n"
      "Note: reconciliation is automatic; after any option below is applied, the system will retry without "
      "manual intervention.\n"
      "\n"
      "Cleanup guidance (choose one):\n"
      "\t[1] Enable driver-manager eviction settings: set ENABLE_GPU_POD_EVICTION=true and/or "
      "ENABLE_AUTO_DRAIN=true.\n"
      "\t[2] Manually stop GPU workloads on this node so that the GPUs are released.\n"
      "\t[3] Wait for running GPU workloads to finish and release GPUs on this node.\n",
      node);
}

std::string gpu_client_guidance(std::string_view node) {
  return fmt::format(
      "Third-party GPU clients (pods that use the GPU without requesting it, e.g. monitoring or health "
      "agents, "
      "a standalone DRA driver) are reset by driver-manager itself when they are annotated "
      "nvidia.com/gpu.client=\"true\" or, for DaemonSets, select nvidia.com/gpu.deploy.client in their "
      "nodeSelector; any other process holding the GPU on node {0} must be stopped by hand.",
      node);
}

std::string cleanup_guidance(std::string_view node, const GuidanceCase& c) {
  if (c.policy_enabled) return policy_guidance(node);
  if (!c.gpu_pod_eviction && !c.auto_drain) return no_eviction_guidance(node);
  return {};
}

}  // namespace dm::manager
