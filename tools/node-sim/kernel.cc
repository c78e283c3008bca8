#include "kernel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace nodesim {
namespace {

constexpr const char* kModules[] = {"nvidia", "nvidia_uvm", "nvidia_modeset"};

std::string users_content(const std::vector<std::string>& holders) {
  std::string out;
  for (const auto& h : holders) out += h + "\n";
  return out;
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
  known_ = true;
  holders_.clear();
  gone_logged_ = false;
  return dm::ok_status();
}

dm::Status SimKernel::set_holders(std::vector<std::string> holders) {
  std::sort(holders.begin(), holders.end());
  if (known_ && holders == holders_) return dm::ok_status();
  const auto dir = module_dir(kHeldModule);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    // The driver was unloaded (driver-manager removed the module): a real kernel would not bring it back.
    if (!gone_logged_) {
      spdlog::info("kernel: module {} is not loaded ({} is gone); not recreating it", kHeldModule,
                   dir.string());
      gone_logged_ = true;
    }
    holders_ = std::move(holders);
    known_ = true;
    return dm::ok_status();
  }
  // users first: a reader that sees the new count finds the holders that explain it.
  auto st = write_file_atomic(dir / "users", users_content(holders));
  if (st) st = write_file_atomic(dir / "refcnt", std::to_string(holders.size()) + "\n");
  if (!st) {
    // Unloaded between the check and the write: that is the "gone" case, not a failure.
    if (!std::filesystem::is_directory(dir, ec)) return set_holders(std::move(holders));
    return st;
  }
  spdlog::info("kernel: {} refcnt {} -> {} (holders: {})", kHeldModule, holders_.size(), holders.size(),
               (holders.empty() ? std::string("none") : fmt::format("{}", fmt::join(holders, ", "))));
  holders_ = std::move(holders);
  known_ = true;
  return dm::ok_status();
}

}  // namespace nodesim
