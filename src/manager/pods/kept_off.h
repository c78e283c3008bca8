// What keeps each GPU client off the node once it is evicted (docs/gpu-clients.md, Pods that tolerate the
// taint): the taint, unless the client tolerates it (a pool's own taint with the same key and effect is the
// one in force, and the pool's GPU pods tolerate it); then the cordon for a pod the scheduler places; the
// label pause for a DaemonSet pod that selects the client label (such pods are the pause's, not the reset's).
// A DaemonSet pod that tolerates the taint is kept off by nothing: its controller recreates it at once and it
// holds the GPU at the unload. Those are named before the first write, with the fix.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manager/pods/pod_watch.h"
#include "manager/rules/label_pause.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// The taint in force for the clients: the node's own with the configured key and effect when there is one
// (never changed), else the configured one. Nullopt when GPU_CLIENT_TAINT does not parse.
std::optional<kube::Taint> taint_in_force(const Settings& settings, const nlohmann::json& node);

// "<ns/name> (DaemonSet <name>, tolerates <taint>)" for each client of either reset phase that nothing keeps
// off: a DaemonSet pod the reset would evict and that tolerates the taint in force.
std::vector<std::string> clients_nothing_keeps_off(const Settings& settings, const nlohmann::json& node,
                                                   const PodSnapshot& pods,
                                                   const std::shared_ptr<const LabelPause>& label_pause);

// Logs one warning naming them with the fix (nothing when there are none).
void warn_clients_nothing_keeps_off(const std::string& node_name, const std::vector<std::string>& pods);

}  // namespace dm::manager
