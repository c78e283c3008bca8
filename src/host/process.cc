#include "host/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "host/fs_util.h"

namespace dm::host {
namespace {

class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&a_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&a_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &a_; }

 private:
  posix_spawn_file_actions_t a_{};
};

}  // namespace

CommandResult run_process(const std::vector<std::string>& argv, StderrMode stderr_mode) {
  CommandResult result;
  if (argv.empty()) {
    result.output = "no command given";
    return result;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.output = "cannot create a pipe: " + errno_text(errno);
    return result;
  }
  SpawnActions actions;
  posix_spawn_file_actions_adddup2(actions.get(), fds[1], STDOUT_FILENO);
  if (stderr_mode == StderrMode::kCapture) {
    posix_spawn_file_actions_adddup2(actions.get(), fds[1], STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(actions.get(), STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: posix_spawn's signature
  args.push_back(nullptr);

  pid_t pid = -1;
  const int err = ::posix_spawnp(&pid, args[0], actions.get(), nullptr, args.data(), environ);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    result.output = "cannot run " + argv[0] + ": " + errno_text(err);
    return result;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return result;
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace dm::host
