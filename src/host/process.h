// Child processes without a shell: posix_spawn, output captured through a pipe.
#pragma once

#include <string>
#include <vector>

#include "host/host.h"

namespace dm::host {

enum class StderrMode { kCapture, kDiscard };

// Runs argv[0] (PATH searched) and waits; stdout (and stderr unless discarded) is captured.
// exit_code: the exit status, 128+N if killed by signal N, -1 if it could not be started.
CommandResult run_process(const std::vector<std::string>& argv,
                          StderrMode stderr_mode = StderrMode::kCapture);

}  // namespace dm::host
