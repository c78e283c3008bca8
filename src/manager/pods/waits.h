// The operand waits after a label batch (docs/behaviour.md, Operand waits): every wait of the batch runs
// together over the pod watch, under one deadline, and reports which pods remain.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "manager/pods/drain.h"
#include "manager/pods/pod_watch.h"
#include "manager/rules/operands.h"

namespace dm::manager {

// True if `pod` (on this node) is one that `wait` waits for: app=<app> in `operator_namespace` ("" = any
// namespace, as upstream's cluster-wide list), or a DaemonSet pod that pausing the key takes off the node
// (its nodeSelector or its required node affinity, label_pause.h).
bool pod_matches_wait(const nlohmann::json& pod, const OperandWait& wait,
                      const std::string& operator_namespace);
// The operand pods of `waits`, as the steps beside them see them: their paused labels keep them off the
// node, and their wait is the operands' step ("an operand pod, waited for beside").
TakenBeside operand_pods(std::vector<OperandWait> waits, std::string operator_namespace);
// What `wait` waits for, as said of `pod`: its description(), or for a DaemonSet pod caught by its node
// affinity "daemon set pods with node affinity on <k>". nullopt when the pod is not one it waits for.
std::optional<std::string> wait_reason(const nlohmann::json& pod, const OperandWait& wait,
                                       const std::string& operator_namespace);

// The deadline of an operand wait that starts now: OPERAND_WAIT_TIMEOUT from now (none when it is 0).
Deadline operand_wait_deadline(const DrainContext& ctx);
// Waits until no pod matches any of `waits`. Logs upstream's start line of each wait (start_line()), then
// progress every 5 s; on failure logs upstream's failure line (failure_line()) for each wait that still
// had pods and returns the error. The three parts below in a row.
Status wait_for_operands(const PodWatch& pods, const std::vector<OperandWait>& waits,
                         const std::string& operator_namespace, Deadline deadline, const CancelToken& cancel);

// Upstream's start line of each wait, the count of a nodeSelector-key wait's DaemonSet pods, and one line
// for each of them that its node affinity (not its nodeSelector) takes off.
void log_operand_waits_start(const PodWatch& pods, const std::vector<OperandWait>& waits,
                             const std::string& operator_namespace);
// The wait itself: progress every 5 s and "All GPU operand pods on the node have shut down" (none when
// `waits` is empty); an error is returned as it is, without a failure line (the caller decides whether the
// wait failed on its own or was stopped because a step running beside it failed).
Status await_operands(const PodWatch& pods, const std::vector<OperandWait>& waits,
                      const std::string& operator_namespace, Deadline deadline, const CancelToken& cancel);
// Upstream's failure line for each wait that still has pods; returns `error` as the run reports it.
Error operand_wait_failed(const PodWatch& pods, const std::vector<OperandWait>& waits,
                          const std::string& operator_namespace, const Error& error);

}  // namespace dm::manager
