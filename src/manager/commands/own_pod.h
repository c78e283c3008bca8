// The pod this program runs in (the driver DaemonSet's pod, when run by the GPU Operator): found before the
// first write so that the run can check it will be able to come back (it must tolerate the gpu-client
// taint) and how long the kubelet gives it after SIGTERM.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "manager/rules/taints.h"

namespace dm::manager {

// Where the pod is looked for: POD_NAMESPACE/POD_NAME when set (downward API), else the pod named HOSTNAME
// (a pod's hostname is its name) in OPERATOR_NAMESPACE (the operator sets it from the pod's namespace).
struct OwnPodRef {
  std::string ns;
  std::string name;
  std::string source;  // how it was derived, for the log
};
std::optional<OwnPodRef> own_pod_ref(const std::string& pod_name, const std::string& pod_namespace,
                                     const std::string& hostname, const std::string& operator_namespace);

// Fills settings' pod_name, pod_namespace and hostname from POD_NAME, POD_NAMESPACE and HOSTNAME where they
// are still empty (the environment of a pod; no flags).
struct Settings;
void fill_pod_identity_from_env(Settings& settings);

struct OwnPod {
  nlohmann::json pod;
  std::string ref;  // namespace/name
  std::string uid;
  Duration grace_period = std::chrono::seconds(30);  // kube::pod_grace_period_seconds (default 30 s)
};

// GETs the pod; nullopt when there is no reference or the pod does not exist (not running in a pod, or a
// HOSTNAME that is no pod name). Other API errors are returned.
Result<std::optional<OwnPod>> find_own_pod(kube::Api& client, const std::optional<OwnPodRef>& ref);

// The node's pod whose UID is `uid` (one LIST, field selector spec.nodeName): this program's pod when
// POD_NAME and HOSTNAME do not name it (driver.hostNetwork makes HOSTNAME the node's name) and its own
// cgroup gives the UID (host::Host::own_pod_uid). Nullopt when no pod of the node has it.
Result<std::optional<OwnPod>> find_own_pod_by_uid(kube::Api& client, const std::string& node,
                                                  const std::string& uid);

// The grace period a SIGTERM cleanup may use: the pod's, minus a margin for the kubelet and the exit (at
// least a few seconds).
Duration cleanup_budget(Duration grace_period);

// Nullopt when the pod tolerates `taint`; else the error explaining why the run refuses to start and what
// to change.
std::optional<Error> check_tolerates_taint(const OwnPod& pod, const kube::Taint& taint);

}  // namespace dm::manager
