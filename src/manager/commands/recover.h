// The `recover` sub-command: undoes what a run of driver-manager that was killed (SIGKILL, OOM, node
// reboot) left on its node - the taint, the cordon and the operand labels it recorded as paused, and its
// lease - and nothing else: an admin's cordon, labels and taints carry no record of ours and stay, and so
// does a cordon of ours that another controller has claimed since for a quarantine or maintenance of its
// own (manager/rules/quarantine.h): uncordoning it would cancel that.
// Refuses while a live lease says a run is in progress (unless forced). Works from any machine with a
// kubeconfig: it only talks to the API server.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// What recover did and left, for its summary line.
struct RecoverReport {
  std::vector<std::string> done;  // "removed taint nvidia.com/gpu:NoSchedule", "uncordoned", ...
  std::vector<std::string> left;  // what it found but left alone, and why
};

// What recover does on a node whose lease is still live: refuse (a run may be in progress), or take it
// for a dead run's (--force).
enum class LiveLease { kRefuse, kOverride };

// The recovery of `node`.
Result<RecoverReport> recover_node(kube::Api& client, const Clock& clock, const std::string& node,
                                   LiveLease live_lease);

// The sub-command: settings.node_name / settings.kubeconfig as for uninstall_driver. Exit code 0 when the
// node is clean afterwards, 1 otherwise (refused, or a request failed).
int run_recover(const Settings& settings, LiveLease live_lease);

}  // namespace dm::manager
