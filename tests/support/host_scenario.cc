// What both host scenarios share: the stub modules' dependencies, pod cgroup paths, and the real parts -
// child processes, mounts (tests/support/host_scenario.h).
#include "support/host_scenario.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dm::test::host_contract {
namespace {

namespace fs = std::filesystem;

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// The fifth field of each /proc/self/mountinfo line (the paths of these tests need no unescaping).
std::vector<std::string> mount_points() {
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (fields >> id >> parent >> dev >> root >> point) out.push_back(point);
  }
  return out;
}

bool at_or_below(const std::string& p, const std::string& dir) {
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

}  // namespace

std::vector<std::string> dependencies_of(std::string_view module) {
  if (module == "nvidia_drm") return {"nvidia", "nvidia_modeset", "drm"};
  if (module == "nvidia" || module == "nouveau" || module == "drm") return {};
  return {
      "nvidia"};  // nvidia_uvm, nvidia_modeset, nvidia_vgpu_vfio, nvidia_peermem, nvidia_fs, gdrdrv, gpu_mon
}

PodCgroup systemd_pod(const std::string& uid, const std::string& container_id) {
  std::string underscored = uid;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  return {uid, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + underscored +
                   ".slice/cri-containerd-" + container_id + ".scope"};
}

PodCgroup cgroupfs_pod(const std::string& uid, const std::string& container_id) {
  return {uid, "kubepods/besteffort/pod" + uid + "/" + container_id};
}

std::vector<std::string> module_names(std::string_view proc_modules) {
  std::vector<std::string> out;
  std::istringstream in{std::string(proc_modules)};
  for (std::string line; std::getline(in, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, std::string_view content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

void HostScenario::mount_driver_root(const std::vector<std::string>& submounts) {
  const std::string root = host().path(host::kDriverRoot);
  std::vector<std::string> points = {root};
  for (const auto& s : submounts) points.push_back(fmt::format("{}/{}", root, s));
  for (const auto& p : points) {
    fs::create_directories(p);
    if (::mount("dm-contract", p.c_str(), "tmpfs", 0, "size=1m") != 0)
      throw std::runtime_error(errno_text("mount tmpfs on " + p));
  }
}

BusyMount HostScenario::hold_busy(const std::string& host_dir) {
  const std::string dir = host().path(host_dir);
  const std::string file = dir + "/busy-file";
  BusyMount busy;
  busy.fd = BusyMount::kFd;
  busy.pid = start_child("a process busy in " + dir, [&]() -> std::string {
    if (::chdir(dir.c_str()) != 0) return errno_text("chdir " + dir);
    const int fd = ::open(file.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0) return errno_text("open " + file);
    if (::dup2(fd, BusyMount::kFd) < 0) return errno_text("dup2 " + file);
    const std::string_view content = BusyMount::kContent;
    if (::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size()))
      return errno_text("write " + file);
    return {};
  });
  return busy;
}

std::string HostScenario::read_busy_file(const BusyMount& busy) const {
  const std::string link = "/proc/" + std::to_string(busy.pid) + "/fd/" + std::to_string(busy.fd);
  return read_text(link);
}

std::vector<std::string> HostScenario::mounts_under_driver_root() {
  std::error_code ec;
  const std::string root = fs::weakly_canonical(host().path(host::kDriverRoot), ec).string();
  std::vector<std::string> out;
  for (auto& p : mount_points()) {
    if (at_or_below(p, root)) out.push_back(std::move(p));
  }
  return out;
}

pid_t HostScenario::start_child(const std::string& what, const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(errno_text("pipe"));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(errno_text("fork"));
  if (pid == 0) {
    ::close(fds[0]);
    const std::string problem = body();
    if (!problem.empty()) {
      (void)!::write(fds[1], problem.data(), problem.size());
      ::_exit(1);
    }
    ::close(fds[1]);  // set up: the parent reads end of file
    for (;;) ::pause();
  }
  ::close(fds[1]);
  std::string said;
  char buf[512];
  for (ssize_t n = 0; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n > 0) said.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  ::close(fds[0]);
  if (!said.empty()) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    throw std::runtime_error("cannot start " + what + ": " + said);
  }
  children_.push_back(pid);
  return pid;
}

void HostScenario::kill_child(pid_t pid) {
  const auto it = std::find(children_.begin(), children_.end(), pid);
  if (it == children_.end()) return;
  children_.erase(it);
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

void HostScenario::release_processes_and_mounts() {
  while (!children_.empty()) kill_child(children_.back());
  // Deepest first, repeated while a pass makes progress (a mount hidden under a later one).
  for (int pass = 0; pass < 8; ++pass) {
    auto points = mounts_under_driver_root();
    if (points.empty()) break;
    std::stable_sort(points.begin(), points.end(),
                     [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    bool progress = false;
    for (const auto& p : points) progress = ::umount2(p.c_str(), MNT_DETACH) == 0 || progress;
    if (!progress) break;
  }
}

}  // namespace dm::test::host_contract
