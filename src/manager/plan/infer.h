// `plan` off the node (docs/plan.md, Off the node): whether plan runs on the node it plans for, the driver
// pod that stands in for the host, the host facts inferred from the API, and pod facts answered from lists
// read once.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "manager/plan/inputs.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// Does plan run on the node it plans for: a simulated host (DRIVER_MANAGER_SIM_ROOT stands for the node), its
// own pod bound to the node, or this machine's hostname equal to the node's name.
bool is_on_node(const Settings& settings, const PlanInputs& in, const std::string& machine_hostname);

// A DaemonSet pod in OPERATOR_NAMESPACE with an init container k8s-driver-manager or DRIVER_CONFIG_DIGEST in
// a container's environment: what the driver DaemonSet's pods look like (a wave plan keeps such pods whole).
bool shaped_as_driver_pod(const nlohmann::json& pod, const std::string& operator_namespace);

// The pod of the driver DaemonSet on the node (the pod a run would be the init container of): a
// DaemonSet pod in OPERATOR_NAMESPACE with an init container k8s-driver-manager or DRIVER_CONFIG_DIGEST in
// a container's environment; nullptr when none.
const nlohmann::json* find_driver_pod(const std::vector<nlohmann::json>& pods,
                                      const std::string& operator_namespace);

// A DaemonSet by namespace and name (nullopt: unknown or absent).
using DaemonSetLookup =
    std::function<std::optional<nlohmann::json>(const std::string& ns, const std::string& name)>;

// Off the node: the host facts the run would read, inferred from the API (docs/plan.md, Off the node).
// Pre-installed host driver: the node label nvidia.com/gpu.deploy.driver=pre-installed. Driver loaded: a
// driver pod runs on the node. Skip decision: DRIVER_CONFIG_DIGEST (or, unset, that of the driver pod's
// DaemonSet template) against the digest of the driver pod's spec, which is what its driver container wrote
// to the state file. The own pod, when not found otherwise, is the driver pod. Sets on_node false.
void infer_host_from_api(const Settings& settings, PlanInputs& in, const DaemonSetLookup& daemonset);

// Pod facts answered from lists read once (the cluster's DaemonSets and ResourceClaims) instead of a GET
// per pod; nullopt lists: the DaemonSet is assumed to exist, no pod holds a claim.
PodFacts listed_pod_facts(const std::shared_ptr<const std::vector<nlohmann::json>>& daemonsets,
                          const std::shared_ptr<const std::vector<nlohmann::json>>& claims);

}  // namespace dm::manager
