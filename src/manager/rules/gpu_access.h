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

// The names the NVIDIA Container Toolkit gives the RuntimeClasses it creates (the GPU Operator's toolkit
// operand): one per handler, named after it.
bool is_nvidia_runtime_class_name(std::string_view name);

// What a RuntimeClass (node.k8s.io/v1) lookup found.
struct RuntimeClassInfo {
  enum class State { kFound, kMissing, kUnreadable };
  State state = State::kMissing;
  std::string handler;  // kFound: the class's handler
  static RuntimeClassInfo found(std::string handler) { return {State::kFound, std::move(handler)}; }
  static RuntimeClassInfo missing() { return {State::kMissing, {}}; }
  // The class may not be read (403: the GPU Operator's stock role has no rule for runtimeclasses).
  static RuntimeClassInfo unreadable() { return {State::kUnreadable, {}}; }
};

// The RuntimeClass named `name`.
using RuntimeClassLookup = std::function<Result<RuntimeClassInfo>(const std::string& name)>;

// What the pod's spec says about its GPU access.
struct GpuAccess {
  std::string why;   // "" = none of the signals; else why it counts as a GPU pod, for its log line
  std::string note;  // a signal that could not be read (the RuntimeClass it names does not exist)
};

// The signals, in this order: the RuntimeClass's handler (when `lookup` is set; a class that may not be
// read counts when its name is one the toolkit gives an NVIDIA class, as a pod naming it is far more
// likely to hold the GPU than not, and a GPU holder missed fails the unload), a literal
// NVIDIA_VISIBLE_DEVICES other than "", "void" and "none" in a regular container, a cdi.k8s.io/* annotation
// naming an nvidia.com device. DaemonSet pods are never counted this way: the GPU Operator's operands, this
// program's own pod and DaemonSet clients run on the NVIDIA runtime by design and are taken off by their
// labels. An error is the lookup's.
Result<GpuAccess> gpu_access_without_request(const nlohmann::json& pod, const RuntimeClassLookup& lookup);

}  // namespace dm::manager
