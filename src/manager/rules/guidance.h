// The operator-facing guidance of cleanup-on-failure, in upstream's exact words (runbooks grep for it),
// and our note about third-party GPU-client pods (docs/gpu-clients.md).
#pragma once

#include <string>
#include <string_view>

namespace dm::manager {

// Auto-upgrade policy on: upstream's block with its four options (stop workloads, disable the policy,
// label upgrade-required, wait), node name filled in. Multi-line, tab-indented, ends in a newline.
std::string policy_guidance(std::string_view node);

// Eviction and auto-drain both off: upstream's block with its three options (enable eviction/drain, stop
// workloads, wait).
std::string no_eviction_guidance(std::string_view node);

// One line of ours, logged after either block: third-party GPU clients are reset by driver-manager itself
// (annotation nvidia.com/gpu.client or nodeSelector key nvidia.com/gpu.deploy.client); other processes
// holding the GPU must be stopped.
std::string gpu_client_guidance(std::string_view node);

// What decides the guidance: the upgrade policy and the two eviction switches.
struct GuidanceCase {
  bool policy_enabled = false;
  bool gpu_pod_eviction = false;  // ENABLE_GPU_POD_EVICTION
  bool auto_drain = false;        // ENABLE_AUTO_DRAIN
};

// The block cleanup-on-failure prints: policy_guidance if the policy is enabled, else no_eviction_guidance
// when eviction and auto-drain are both off, else "" (no guidance).
std::string cleanup_guidance(std::string_view node, const GuidanceCase& c);

}  // namespace dm::manager
