// The operator-facing guidance of cleanup-on-failure (docs/behaviour.md, Cleanup on failure) and the note
// about third-party gpu-client pods, which the upgrade controller does not know. Texts keep upstream's
// numbered options for existing runbooks.
#pragma once

#include <string>
#include <string_view>

namespace dm::manager {

// Auto-upgrade policy on: the four options (stop workloads, disable the policy, label
// upgrade-required, wait), node name filled in. Multi-line, printed raw.
std::string policy_guidance(std::string_view node);

// Eviction and auto-drain both off: the three options (enable eviction/drain, stop workloads, wait).
std::string no_eviction_guidance(std::string_view node);

// One line: third-party GPU clients are reset by driver-manager itself (annotation nvidia.com/gpu.client
// or nodeSelector key nvidia.com/gpu.deploy.client); other processes holding the GPU must be stopped.
std::string gpu_client_guidance(std::string_view node);

// The guidance cleanup-on-failure prints: policy_guidance if `policy_enabled`, else no_eviction_guidance
// when eviction and auto-drain are both off, else "" (no guidance); the gpu-client line appended to both.
std::string cleanup_guidance(std::string_view node, bool policy_enabled, bool enable_gpu_pod_eviction,
                             bool enable_auto_drain);

}  // namespace dm::manager
