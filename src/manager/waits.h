// The operand waits after a label batch (docs/behaviour.md, Operand waits): every wait of the batch runs
// together over the pod watch, under one deadline, and reports which pods remain.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "manager/operands.h"
#include "manager/pod_watch.h"

namespace dm::manager {

// True if `pod` (on this node) is one that `wait` waits for: app=<app> in `operator_namespace` ("" = any
// namespace, as upstream's cluster-wide list), or a DaemonSet pod whose nodeSelector holds the key.
bool pod_matches_wait(const nlohmann::json& pod, const OperandWait& wait,
                      const std::string& operator_namespace);

// Waits until no pod matches any of `waits`. Logs upstream's start line of each wait (start_line()), then
// progress every 5 s; on failure logs upstream's failure line (failure_line()) for each wait that still
// had pods and returns the error.
Status wait_for_operands(const PodWatch& pods, const std::vector<OperandWait>& waits,
                         const std::string& operator_namespace, Deadline deadline, const CancelToken& cancel);

}  // namespace dm::manager
