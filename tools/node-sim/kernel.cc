#include "kernel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace nodesim {
namespace {

constexpr const char* kModules[] = {"nvidia", "nvidia_uvm", "nvidia_modeset"};

// The majors of a real host (an H200 with driver 580); /dev/nvidia0 is minor 0, /dev/nvidiactl minor 255.
constexpr const char* kProcDevices =
    "Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n238 nvidia-uvm\n241 nvidia-caps\n"
    "242 nvidia-caps-imex-channels\n\nBlock devices:\n  7 loop\n";
constexpr unsigned kNvidiaMajor = 195;
constexpr std::pair<const char*, unsigned> kDeviceNodes[] = {{"nvidia0", 0}, {"nvidiactl", 255}};

std::string users_content(const std::vector<SimHolder>& holders) {
  std::string out;
  for (const auto& h : holders) out += h.key + "\n";
  return out;
}

// The cgroup v2 path the kubelet's systemd driver and containerd give a burstable pod's container.
std::string cgroup_content(const std::string& uid) {
  std::string u = uid;
  std::replace(u.begin(), u.end(), '-', '_');
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u +
         ".slice/cri-containerd-0123456789abcdef.scope\n";
}

bool contains(const std::vector<SimHolder>& v, const SimHolder& h) {
  return std::find(v.begin(), v.end(), h) != v.end();
}

}  // namespace

dm::Status write_file_atomic(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path tmp = path.parent_path() / ("." + path.filename().string() + ".node-sim.tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return dm::Error("cannot create " + tmp.string() + ": " + std::strerror(errno));
  }
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return dm::Error("cannot write " + tmp.string() + ": " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return dm::Error("cannot rename " + tmp.string() + " to " + path.string() + ": " + std::strerror(err));
  }
  return dm::ok_status();
}

SimKernel::SimKernel(std::filesystem::path sim_root) : root_(std::move(sim_root)) {}

std::filesystem::path SimKernel::module_dir(const std::string& module) const {
  return root_ / "sys" / "module" / module;
}

bool SimKernel::driver_loaded() const {
  std::error_code ec;
  return std::filesystem::is_directory(module_dir(kHeldModule), ec);
}

dm::Status SimKernel::write_driver_state(const std::string& digest) {
  const auto dir = root_ / "run" / "nvidia";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return dm::Error("cannot create " + dir.string() + ": " + ec.message());
  if (auto st = write_file_atomic(dir / "nvidia-driver.state", digest + "\n"); !st) return st;
  spdlog::info("kernel: driver state {} written ({})", (dir / "nvidia-driver.state").string(), digest);
  return dm::ok_status();
}

dm::Status SimKernel::load_driver() {
  for (const char* m : kModules) {
    std::error_code ec;
    std::filesystem::create_directories(module_dir(m), ec);
    if (ec) {
      return dm::Error("cannot create simulated module directory " + module_dir(m).string() + ": " +
                       ec.message() + " (check that --sim-root is writable)");
    }
    for (const auto& [file, content] : {std::pair{"refcnt", "0\n"}, std::pair{"users", ""}}) {
      if (auto st = write_file_atomic(module_dir(m) / file, content); !st) return st;
    }
    spdlog::info("kernel: module {} loaded (refcnt 0) at {}", m, module_dir(m).string());
  }
  std::error_code ec;
  std::filesystem::create_directories(root_ / "proc", ec);
  std::filesystem::create_directories(root_ / "dev", ec);
  if (auto st = write_file_atomic(root_ / "proc" / "devices", kProcDevices); !st) return st;
  for (const auto& [name, minor] : kDeviceNodes) {
    const auto node = root_ / "dev" / name;
    std::filesystem::remove(node, ec);
    if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(kNvidiaMajor, minor)) != 0) {
      spdlog::warn("kernel: cannot create device node {}: {} (processes holding the GPU will not be found)",
                   node.string(), std::strerror(errno));
    }
  }
  known_ = true;
  holders_.clear();
  gone_logged_ = false;
  return dm::ok_status();
}

dm::Status SimKernel::add_process(const SimHolder& holder) {
  auto [it, inserted] = pid_of_uid_.try_emplace(holder.uid, next_pid_);
  if (inserted) ++next_pid_;
  const auto dir = root_ / "proc" / std::to_string(it->second);
  std::error_code ec;
  std::filesystem::create_directories(dir / "fd", ec);
  if (ec) return dm::Error("cannot create simulated process " + dir.string() + ": " + ec.message());
  if (auto st = write_file_atomic(dir / "comm", "gpu-workload\n"); !st) return st;
  if (auto st = write_file_atomic(dir / "cgroup", cgroup_content(holder.uid)); !st) return st;
  int fd = 3;
  for (const auto& [name, minor] : kDeviceNodes) {
    (void)minor;
    const auto link = dir / "fd" / std::to_string(fd++);
    std::filesystem::remove(link, ec);
    std::filesystem::create_symlink(root_ / "dev" / name, link, ec);
    if (ec) return dm::Error("cannot create " + link.string() + ": " + ec.message());
  }
  return dm::ok_status();
}

void SimKernel::remove_process(const SimHolder& holder) {
  const auto it = pid_of_uid_.find(holder.uid);
  if (it == pid_of_uid_.end()) return;
  std::error_code ec;
  std::filesystem::remove_all(root_ / "proc" / std::to_string(it->second), ec);
  pid_of_uid_.erase(it);
}

dm::Status SimKernel::set_holders(std::vector<SimHolder> holders) {
  std::sort(holders.begin(), holders.end(),
            [](const SimHolder& a, const SimHolder& b) { return a.key < b.key; });
  if (known_ && holders == holders_) return dm::ok_status();
  const auto dir = module_dir(kHeldModule);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    // The driver was unloaded (driver-manager removed the module): a real kernel would not bring it back,
    // and no process can hold it any more.
    if (!gone_logged_) {
      spdlog::info("kernel: module {} is not loaded ({} is gone); not recreating it", kHeldModule,
                   dir.string());
      gone_logged_ = true;
    }
    for (const auto& h : holders_) remove_process(h);
    holders_ = std::move(holders);
    known_ = true;
    return dm::ok_status();
  }
  // New processes and users first: a reader that sees the new count finds the holders that explain it.
  for (const auto& h : holders) {
    if (!contains(holders_, h)) {
      if (auto st = add_process(h); !st) return st;
    }
  }
  auto st = write_file_atomic(dir / "users", users_content(holders));
  if (st) st = write_file_atomic(dir / "refcnt", std::to_string(holders.size()) + "\n");
  if (!st) {
    // Unloaded between the check and the write: that is the "gone" case, not a failure.
    if (!std::filesystem::is_directory(dir, ec)) return set_holders(std::move(holders));
    return st;
  }
  for (const auto& h : holders_) {
    if (!contains(holders, h)) remove_process(h);
  }
  std::vector<std::string> keys;
  keys.reserve(holders.size());
  for (const auto& h : holders) keys.push_back(h.key);
  spdlog::info("kernel: {} refcnt {} -> {} (holders: {})", kHeldModule, holders_.size(), holders.size(),
               (keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "))));
  holders_ = std::move(holders);
  known_ = true;
  return dm::ok_status();
}

}  // namespace nodesim
