#include "manager/guidance.h"

#include <fmt/format.h>

namespace dm::manager {

std::string policy_guidance(std::string_view node) {
  return fmt::format(
      "Cleanup cannot proceed on node {0}: the GPU driver auto-upgrade policy is enabled, so the GPU "
      "Operator's "
      "upgrade controller, not driver-manager, owns the eviction of GPU workloads.\n"
      "driver-manager retries by itself (init container restart) once one of the following is done:\n"
      "  1. Stop the GPU workloads running on node {0} manually.\n"
      "  2. Disable the auto-upgrade policy (driver.upgradePolicy.autoUpgrade=false in the ClusterPolicy) "
      "and make "
      "sure ENABLE_GPU_POD_EVICTION=true (optionally also ENABLE_AUTO_DRAIN=true) in the driver manager's "
      "environment, so that driver-manager evicts them itself.\n"
      "  3. Ask the upgrade controller to evict the GPU workloads now:\n"
      "       kubectl label node {0} nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite\n"
      "  4. Wait for the GPU workloads on node {0} to finish.",
      node);
}

std::string no_eviction_guidance(std::string_view node) {
  return fmt::format(
      "Cleanup cannot proceed on node {0}: GPU pod eviction and automatic node drain are both disabled, so "
      "driver-manager may not remove the GPU workloads that keep the driver in use.\n"
      "driver-manager retries by itself (init container restart) once one of the following is done:\n"
      "  1. Enable ENABLE_GPU_POD_EVICTION=true and/or ENABLE_AUTO_DRAIN=true in the driver manager's "
      "environment.\n"
      "  2. Stop the GPU workloads running on node {0} manually.\n"
      "  3. Wait for the GPU workloads on node {0} to finish.",
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

std::string cleanup_guidance(std::string_view node, bool policy_enabled, bool enable_gpu_pod_eviction,
                             bool enable_auto_drain) {
  if (policy_enabled) return policy_guidance(node) + "\n" + gpu_client_guidance(node);
  if (!enable_gpu_pod_eviction && !enable_auto_drain) {
    return no_eviction_guidance(node) + "\n" + gpu_client_guidance(node);
  }
  return {};
}

}  // namespace dm::manager
