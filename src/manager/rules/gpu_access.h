// GPU users without a GPU request (docs/behaviour.md, GPU workloads): a pod that runs on the NVIDIA container
// runtime through its RuntimeClass, sets NVIDIA_VISIBLE_DEVICES, or names NVIDIA CDI devices in a
// cdi.k8s.io/* annotation gets GPUs without a nvidia.com/gpu resource or a DRA claim, and holds the driver
// like a pod that has one. Pure: the RuntimeClass's handler comes in through a lookup.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dm::manager {

// The runtime handlers of the NVIDIA container runtime.
bool is_nvidia_runtime_handler(std::string_view handler);

// The handler of RuntimeClass `name` (node.k8s.io/v1), nullopt when there is no such class.
using RuntimeClassLookup = std::function<Result<std::optional<std::string>>(const std::string& name)>;

// What the pod's spec says about its GPU access.
struct GpuAccess {
  std::string why;   // "" = none of the signals; else why it counts as a GPU pod, for its log line
  std::string note;  // a signal that could not be read (the RuntimeClass it names does not exist)
};

// The signals, in this order: the RuntimeClass's handler (when `lookup` is set), a literal
// NVIDIA_VISIBLE_DEVICES other than "", "void" and "none" in a regular container, a cdi.k8s.io/* annotation
// naming an nvidia.com device. DaemonSet pods are never counted this way: the GPU Operator's operands, this
// program's own pod and DaemonSet clients run on the NVIDIA runtime by design and are taken off by their
// labels. An error is the lookup's.
Result<GpuAccess> gpu_access_without_request(const nlohmann::json& pod, const RuntimeClassLookup& lookup);

}  // namespace dm::manager
