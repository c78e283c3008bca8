// Running child processes from tests: capture output, feed stdin, extra environment, background processes.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace dm::test {

struct CommandOutput {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;
  std::string err;
};

// Runs argv (PATH is searched), waits, returns its exit code and output. `env` adds/overrides variables;
// a value of "\x01unset" removes one.
CommandOutput run_command(const std::vector<std::string>& argv, const std::string& stdin_data = {},
                          const std::map<std::string, std::string>& env = {});

// A child process in the background whose stdout+stderr go to a file; killed (SIGTERM, then SIGKILL) when
// destroyed unless it has already been waited for.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::map<std::string, std::string>& env = {});
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Waits for the process to exit (up to timeout_s); returns its exit code (128+N if killed by signal N),
  // or -1 on timeout.
  int wait(double timeout_s = 60);
  [[nodiscard]] bool running();
  [[nodiscard]] std::string log() const;  // contents of the log file
  [[nodiscard]] const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string log_path_;
};

// Absolute path of a built binary (build/bin/<name>).
std::string bin_path(const std::string& name);
// Absolute path inside the source tree.
std::string source_path(const std::string& rel);
// A fresh temporary directory (removed by the caller if wanted).
std::string make_temp_dir(const std::string& prefix = "dm-test");
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);

}  // namespace dm::test
