// Child processes without a shell: posix_spawn, output captured through a pipe; and the small interface
// through which callers run them, so a test can intercept commands without faking the whole host.
#pragma once

#include <string>
#include <vector>

namespace dm::host {

struct CommandResult {
  int exit_code = -1;  // -1: could not be started
  std::string output;  // stdout + stderr, interleaved
};

// Runs child processes. The real Host is one; tests substitute a recorder.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs a child process (no shell), capturing its output.
  virtual CommandResult run(const std::vector<std::string>& argv) = 0;
};

enum class StderrMode { kCapture, kDiscard };

// Runs argv[0] (PATH searched) and waits; stdout (and stderr unless discarded) is captured.
// exit_code: the exit status, 128+N if killed by signal N, -1 if it could not be started.
CommandResult run_process(const std::vector<std::string>& argv,
                          StderrMode stderr_mode = StderrMode::kCapture);

}  // namespace dm::host
