// What the sub-commands that talk to the cluster (uninstall_driver, plan, recover) start with: the settings
// completed from the pod's environment, the client configuration and the client, each failure said once in
// the same words; and the skip decision both uninstall_driver and plan make on the node.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "common/clock.h"
#include "host/host.h"
#include "kube/client.h"
#include "kube/config.h"
#include "manager/rules/settings.h"
#include "manager/rules/skip.h"

namespace dm::manager {

struct Connection {
  kube::Config config;
  std::unique_ptr<kube::Client> client;
};

// Options of a client whose every request rides out a control-plane outage: tried again until the deadline of
// what it serves (kube::RequestDeadline), else for ClientOptions::retry_for (5 minutes). What stops a request
// is the view it is sent through (kube::StoppedBy).
kube::ClientOptions restart_tolerant_options(const Clock& clock);

// Loads the configuration of settings.kubeconfig and creates the client; on failure logs the critical line
// and returns nullopt.
std::optional<Connection> connect(const Settings& settings, const kube::ClientOptions& options);

// NODE_NAME is set; otherwise logs "NODE_NAME (--node-name) is empty: set it to <what>" and returns false.
bool require_node_name(const Settings& settings, std::string_view what);

// The skip-uninstall decision (manager/rules/skip), the host's driver state file read only when the
// settings do not decide alone.
SkipDecision read_skip_decision(const Settings& settings, const host::Host& host);

}  // namespace dm::manager
