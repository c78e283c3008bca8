#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dm::test {
namespace {

std::vector<std::string> build_env(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> all;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    all[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) {
    if (v == "\x01unset") {
      all.erase(k);
    } else {
      all[k] = v;
    }
  }
  std::vector<std::string> out;
  out.reserve(all.size());
  for (const auto& [k, v] : all) out.push_back(std::string(k).append("=").append(v));
  return out;
}

std::vector<char*> cstrs(std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A cross-built test runs the project's own programs (cross-built too) through the emulator that runs the
// test itself, as binfmt_misc would: DM_TEST_EMULATOR is that command, its words separated by spaces.
std::vector<std::string> through_emulator(const std::vector<std::string>& argv) {
#ifdef DM_TEST_EMULATOR
  if (!argv.empty() && argv[0].starts_with(std::string(DM_BIN_DIR) + "/")) {
    std::vector<std::string> out;
    std::istringstream words(DM_TEST_EMULATOR);
    for (std::string w; words >> w;) out.push_back(w);
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
#endif
  return argv;
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

CommandOutput run_command(const std::vector<std::string>& argv, const std::string& stdin_data,
                          const std::map<std::string, std::string>& env) {
  int in[2];
  int out[2];
  int err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<std::string> args = through_emulator(argv);
  auto cargs = cstrs(args);
  auto envs = build_env(env);
  auto cenv = cstrs(envs);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, cargs[0], &fa, nullptr, cargs.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  CommandOutput result;
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    result.err = "spawn " + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  // Feed stdin from a thread so a child that writes a lot before reading cannot deadlock us.
  std::thread feeder([fd = in[1], data = stdin_data] {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fd);
  });
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  feeder.join();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = decode_status(status);
  return result;
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv, const std::string& log_path,
                                     const std::map<std::string, std::string>& env)
    : log_path_(log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> args = through_emulator(argv);
  auto cargs = cstrs(args);
  auto envs = build_env(env);
  auto cenv = cstrs(envs);
  const int rc = posix_spawnp(&pid_, cargs[0], &fa, nullptr, cargs.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("spawn " + argv[0] + ": " + std::strerror(rc));
}

BackgroundProcess::~BackgroundProcess() {
  if (reaped_ || pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (wait(10) == -1) {
    ::kill(pid_, SIGKILL);
    wait(10);
  }
}

void BackgroundProcess::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

int BackgroundProcess::wait(double timeout_s) {
  if (reaped_) return decode_status(status_);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return decode_status(status_);
    }
    if (std::chrono::steady_clock::now() >= end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool BackgroundProcess::running() {
  if (reaped_) return false;
  const pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

std::string BackgroundProcess::log() const {
  return read_file(log_path_);
}

std::string bin_path(const std::string& name) {
  return std::string(DM_BIN_DIR) + "/" + name;
}

std::string source_path(const std::string& rel) {
  return std::string(DM_SOURCE_DIR) + "/" + rel;
}

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
}

}  // namespace dm::test
