// The node labels and annotations driver-manager reads and writes, in one place: those of the GPU Operator
// it acts on, and its own (every one of which a run removes on its way out, and `recover` after a crash).
#pragma once

#include <string_view>

namespace dm::manager {

// The GPU Operator's.
inline constexpr std::string_view kDeployLabelPrefix = "nvidia.com/gpu.deploy.";
inline constexpr std::string_view kClientLabel = "nvidia.com/gpu.deploy.client";
inline constexpr std::string_view kDraDriverLabel = "nvidia.com/gpu.deploy.dra-driver";
inline constexpr std::string_view kDriverLabel = "nvidia.com/gpu.deploy.driver";
inline constexpr std::string_view kPreInstalledValue = "pre-installed";
inline constexpr std::string_view kUpgradeEnabledAnnotation = "nvidia.com/gpu-driver-upgrade-enabled";

// driver-manager's own.
// The run's lease: one run per node (manager/lease).
inline constexpr std::string_view kLeaseAnnotation = "nvidia.com/gpu-driver-manager.lease";
// The operand labels a run paused and their values before (manager/paused_record).
inline constexpr std::string_view kPausedLabelsAnnotation = "nvidia.com/gpu-driver-manager.paused-labels";
// Written at each phase boundary of a run, removed at its end (manager/progress).
inline constexpr std::string_view kStateAnnotation = "nvidia.com/gpu-driver-manager.state";
// Names the taint driver-manager added ("key[=value]:effect"); written and removed in the same patch as the
// taint itself (manager/taint_ops).
inline constexpr std::string_view kTaintOwnerAnnotation = "nvidia.com/gpu-driver-manager.tainted";
// Marks a cordon made by driver-manager, so that only that cordon is ever undone (an admin's survives).
inline constexpr const char* kCordonedAnnotation = "nvidia.com/gpu-driver-manager.cordoned";

}  // namespace dm::manager
