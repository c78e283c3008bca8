// Running an exec credential plugin (users[].user.exec of a kubeconfig): no shell, no terminal, bounded in
// time.
#pragma once

#include <chrono>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "kube/config.h"

namespace dm::kube {

// Runs `exec.command` (PATH searched) with `exec.args`, the program's environment plus `exec.env` and
// KUBERNETES_EXEC_INFO=`info`, standard input from /dev/null, and returns what it printed on standard
// output. Errors name the command: it cannot be started (with the kubeconfig's installHint), it exited with
// a non-zero status or was killed by a signal (with the end of its standard error), or it was still running
// after `limit` (then it and the processes it started are killed).
Result<std::string> run_exec_plugin(const ExecConfig& exec, const std::string& info, const Clock& clock,
                                    Duration limit);

}  // namespace dm::kube
