// What node-sim decides about one pod, as pure functions of its JSON (no I/O), so the rules stay small and
// readable: does it hold the GPU, should it be started, how long does its termination take.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/go_bool.h"

namespace nodesim {

using dm::go_true;
// Annotation: seconds (may be 0 or a decimal) a terminating pod takes to finish, instead of its grace period.
inline constexpr const char* kTerminateAfterAnnotation = "node-sim/terminate-after-seconds";
// Annotation: "true" => the pod never finishes terminating.
inline constexpr const char* kStuckAnnotation = "node-sim/stuck-terminating";
// Annotation: "true" => the pod holds the GPU without requesting it.
inline constexpr const char* kHoldsGpuAnnotation = "node-sim/holds-gpu";
// Annotation: "true" => once the pod runs, the simulated kernel "loads the driver" (kernel-only mode).
inline constexpr const char* kLoadsDriverAnnotation = "node-sim/loads-driver";
// Label (and value) of the GPU Operator's driver pods: they load the driver as the annotation above says.
inline constexpr const char* kDriverComponentLabel = "app.kubernetes.io/component";
inline constexpr const char* kDriverComponentValue = "nvidia-driver";
// Annotation of third-party GPU clients (driver-manager's own contract).
inline constexpr const char* kGpuClientAnnotation = "nvidia.com/gpu.client";

// "ns/name" of a pod, for logs and the users file.
std::string pod_key(const nlohmann::json& pod);

// The pod holds the GPU device while it runs: the device plugin allocates it a GPU (dm::kube::
// pod_is_allocated_gpu: a non-zero GPU resource in a container), the kubelet prepared an allocated claim of
// the GPU DRA driver for it (`gpu_claim`: the Simulator reads the pod's claims from the API server and
// judges them by driver-manager's own claim rule, dm::manager::is_allocated_gpu_claim), or it is annotated
// nvidia.com/gpu.client or node-sim/holds-gpu with a true value.
//
// The resource half is deliberately not driver-manager's "uses a GPU" rule (dm::kube::
// pod_declares_gpu_resource: any quantity, the pods it evicts): a device plugin hands a device only to a
// non-zero request, and node-sim simulates what the kernel sees, not what a pod declares.
bool holds_gpu(const nlohmann::json& pod, bool gpu_claim = false);

// status.phase == "Running".
bool is_running(const nlohmann::json& pod);

// The pod is annotated node-sim/loads-driver with a true value, or is a GPU Operator driver pod (labelled
// app.kubernetes.io/component=nvidia-driver, as the operator's driver DaemonSet labels its pods).
bool loads_driver(const nlohmann::json& pod);

// Some container of the pod is running, as a kubelet reports it (status.containerStatuses[].state.running),
// and the pod is not Succeeded or Failed: its processes may hold the device.
bool has_running_container(const nlohmann::json& pod);

// Every container of spec.containers is reported running (init containers are done).
bool all_containers_running(const nlohmann::json& pod);

// The literal value of the first DRIVER_CONFIG_DIGEST environment variable of the pod's containers
// (then its init containers), as the driver container records it in the driver state file.
std::optional<std::string> driver_config_digest(const nlohmann::json& pod);

// Not terminating, not finished, and not yet Running with Ready=True: a kubelet would (re)start it.
bool needs_start(const nlohmann::json& pod);

// How long the pod's termination takes once node-sim has seen it terminating: the terminate-after
// annotation if present and valid, else metadata.deletionGracePeriodSeconds (0 if absent).
// nullopt when the pod is stuck (annotation node-sim/stuck-terminating: "true").
// `warning` receives a message if the annotation is present but invalid (it is then ignored).
std::optional<double> termination_delay_seconds(const nlohmann::json& pod, std::string* warning = nullptr);

// The status subresource strategic-merge patch that makes the pod Running and Ready, with every container
// running and ready (init containers terminated with exit code 0). `now` is an RFC 3339 time.
nlohmann::json running_status_patch(const nlohmann::json& pod, const std::string& now,
                                    const std::string& host_ip, const std::string& pod_ip);

}  // namespace nodesim
