// What every step of the uninstall flow works with: the settings, the cluster, this node, the host, one
// clock and the SIGTERM cancel token.
#pragma once

#include "common/clock.h"
#include "host/host.h"
#include "kube/client.h"
#include "manager/node_ops.h"
#include "manager/pod_watch.h"
#include "manager/settings.h"

namespace dm::manager {

struct FlowContext {
  const Settings& settings;
  kube::Client& client;
  host::Host& host;
  const Clock& clock;
  CancelToken cancel;  // fires on SIGTERM; every wait and sleep honours it
  NodeOps& node;
  PodWatch& pods;
};

}  // namespace dm::manager
