#include "kube/exec_plugin.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT: the POSIX way to pass this process's environment on

namespace dm::kube {
namespace {

// What is kept of a plugin's output: a credential is a few kilobytes; more is a plugin gone wrong.
constexpr size_t kMaxStdout = 1 << 20;
constexpr size_t kMaxStderr = 4096;

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct Pipe {
  Fd read;
  Fd write;
  bool open() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) return false;
    read.fd = fds[0];
    write.fd = fds[1];
    return true;
  }
};

struct SpawnActions {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
  SpawnActions() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  ~SpawnActions() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

// This process's environment with `exec.env` and KUBERNETES_EXEC_INFO set (a name given again replaces it).
std::vector<std::string> plugin_environment(const ExecConfig& exec, const std::string& info) {
  std::vector<std::pair<std::string, std::string>> set = exec.env;
  set.emplace_back("KUBERNETES_EXEC_INFO", info);
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [n, v] : set) replaced = replaced || n == name;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [n, v] : set) {
    std::string assignment = n;
    assignment += '=';
    assignment += v;
    env.push_back(std::move(assignment));
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  p.reserve(strings.size() + 1);
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Reads both pipes until they close or `deadline` passes; false on the deadline.
bool drain(Pipe& out, Pipe& err, std::string& out_text, std::string& err_text, const Clock& clock,
           Deadline deadline) {
  std::array<char, 4096> buf{};
  while (out.read.fd >= 0 || err.read.fd >= 0) {
    if (deadline.passed(clock)) return false;
    std::array<pollfd, 2> fds{{{out.read.fd, POLLIN, 0}, {err.read.fd, POLLIN, 0}}};
    const int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc < 0 && errno != EINTR) return true;
    for (size_t i = 0; i < 2 && rc > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      Fd& fd = i == 0 ? out.read : err.read;
      std::string& text = i == 0 ? out_text : err_text;
      const ssize_t n = ::read(fd.fd, buf.data(), buf.size());
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        fd.reset();
        continue;
      }
      const size_t keep = i == 0 ? kMaxStdout : kMaxStderr;
      if (text.size() < keep) text.append(buf.data(), std::min(static_cast<size_t>(n), keep - text.size()));
    }
  }
  return true;
}

// Waits for the child to end; -1 when `deadline` passes first.
int reap(pid_t pid, const Clock& clock, Deadline deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;
    if (deadline.passed(clock)) return -1;
    ::poll(nullptr, 0, 10);
  }
}

std::string describe_limit(Duration limit) {
  return fmt::format("{:g} s", std::chrono::duration<double>(limit).count());
}

}  // namespace

Result<std::string> run_exec_plugin(const ExecConfig& exec, const std::string& info, const Clock& clock,
                                    Duration limit) {
  const std::string what = "exec credential plugin \"" + exec.command + "\"";
  Pipe out;
  Pipe err;
  if (!out.open() || !err.open()) return Error(what + ": cannot create a pipe: " + std::strerror(errno));
  SpawnActions sa;
  posix_spawn_file_actions_addopen(&sa.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&sa.actions, out.write.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&sa.actions, err.write.fd, STDERR_FILENO);
  // A process group of its own, so that a plugin past its time is killed with whatever it started.
  posix_spawnattr_setflags(&sa.attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&sa.attr, 0);

  std::vector<std::string> argv{exec.command};
  argv.insert(argv.end(), exec.args.begin(), exec.args.end());
  std::vector<std::string> env = plugin_environment(exec, info);
  auto argv_p = pointers(argv);
  auto env_p = pointers(env);
  pid_t pid = 0;
  const int rc =
      ::posix_spawnp(&pid, exec.command.c_str(), &sa.actions, &sa.attr, argv_p.data(), env_p.data());
  if (rc != 0) {
    std::string msg = what + ": cannot be started: " + std::strerror(rc);
    if (!exec.install_hint.empty()) msg += "; " + trimmed(exec.install_hint);
    return Error(msg);
  }
  out.write.reset();
  err.write.reset();

  const Deadline deadline = Deadline::after(clock, limit);
  std::string out_text;
  std::string err_text;
  const bool finished = drain(out, err, out_text, err_text, clock, deadline);
  const int status = finished ? reap(pid, clock, deadline) : -1;
  if (status == -1) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Error(what + ": still running after " + describe_limit(limit) + "; killed");
  }
  const std::string stderr_part = trimmed(err_text).empty() ? "" : ": " + trimmed(err_text);
  if (WIFSIGNALED(status))
    return Error(what + ": killed by signal " + std::to_string(WTERMSIG(status)) + stderr_part);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return Error(what + ": exited with status " + std::to_string(WEXITSTATUS(status)) + stderr_part);
  return out_text;
}

}  // namespace dm::kube
