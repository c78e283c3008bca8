// The one Host implementation: every path goes through path() (identity on the real machine, under the
// simulation root otherwise); modules go through a ModuleBackend (the real kernel, or the simulated one).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <iterator>

#include "common/duration_text.h"
#include "host/cgroup.h"
#include "host/fs_util.h"
#include "host/host.h"
#include "host/modules.h"
#include "host/mounts.h"
#include "host/process.h"

namespace dm::host {
namespace {

constexpr std::string_view kMellanoxVendor = "0x15b3";

class HostImpl final : public Host {
 public:
  HostImpl(std::string root, std::unique_ptr<ModuleBackend> modules)
      : root_(std::move(root)), modules_(std::move(modules)) {}

  [[nodiscard]] std::string path(std::string_view host_path) const override {
    if (root_.empty()) return std::string(host_path);
    std::string p = root_;
    if (host_path.empty() || host_path.front() != '/') p.push_back('/');
    p.append(host_path);
    return p;
  }

  [[nodiscard]] bool module_loaded(std::string_view name) const override { return modules_->loaded(name); }

  [[nodiscard]] Result<ModuleState> module_state(std::string_view name) const override {
    return modules_->state(name);
  }

  [[nodiscard]] Status can_unload_nvidia() const override {
    auto stack = read_stack(Holders::kSkip);
    if (!stack) return stack.error().wrap("cannot inspect the NVIDIA driver kernel modules");
    return check_stack_unloadable(*stack);
  }

  Status unload_nvidia_modules() override {
    spdlog::info("Unloading NVIDIA driver kernel modules");
    std::vector<std::string> removed;
    const auto partially = [&removed] {
      return removed.empty() ? std::string("none was unloaded")
                             : fmt::format("NVIDIA driver partially unloaded (already removed: {})",
                                           fmt::join(removed, ", "));
    };
    // Each round re-reads the stack: removing a module releases the references it held on the others. The
    // /proc scan runs once, before anything is removed; later an open file shows in the counts.
    for (size_t round = 0;; ++round) {
      auto stack = read_stack(round == 0 ? Holders::kFind : Holders::kSkip);
      if (!stack)
        return stack.error().wrap("cannot inspect the NVIDIA driver kernel modules, " + partially());
      if (stack->empty()) break;
      if (auto never = check_stack_unloadable(*stack); !never) return never;
      const UnloadDecision decision = decide_nvidia_unload(*stack);
      if (!decision.allowed() || round > std::size(kNvidiaModules)) {
        // Upstream's per-module line, the holders in place of the kernel's errno (the removal is not tried).
        for (const auto& why : decision.blockers) spdlog::warn("Failed to unload kernel module {}", why);
        spdlog::error("Could not unload NVIDIA driver kernel modules, driver is in use");
        spdlog::error("{}", nvidia_modules_table());
        const std::string blockers = decision.allowed()
                                         ? std::string("the stack is still loaded after every removal")
                                         : fmt::format("{}", fmt::join(decision.blockers, "; "));
        return Error::with_errno(
            EAGAIN, "NVIDIA driver kernel modules are in use, " + partially() + ": " + blockers +
                        ". Stop the listed processes/pods (or unload the listed modules) and retry");
      }
      const std::string& name = decision.order.front();
      if (auto st = modules_->remove(name); !st) {
        // Something took a reference between the check and the removal.
        spdlog::error("Failed to unload kernel module {}: {}", name, st.error().message);
        spdlog::error("Could not unload NVIDIA driver kernel modules, driver is in use");
        spdlog::error("{}", nvidia_modules_table());
        return st.error().wrap(removed.empty() ? std::string("NVIDIA driver kernel modules were not unloaded")
                                               : partially());
      }
      spdlog::info("Unloaded kernel module {}", name);
      removed.push_back(name);
    }
    if (removed.empty()) spdlog::info("No NVIDIA driver kernel modules are loaded");
    return {};
  }

  [[nodiscard]] std::vector<HolderProcess> nvidia_holder_processes() const override {
    return modules_->holder_processes();
  }

  [[nodiscard]] std::optional<std::string> own_pod_uid() const override {
    auto text = read_text_file(path("/proc/self/cgroup"));
    if (!text) return std::nullopt;
    return pod_uid_from_cgroup(*text);
  }

  [[nodiscard]] std::string nvidia_modules_table() const override {
    auto text = modules_->proc_modules();
    if (!text) return format_modules_table("") + "(" + text.error().message + ")\n";
    return format_modules_table(*text);
  }

  Status unload_module(std::string_view name) override {
    spdlog::info("Unloading {} driver", name);
    auto st = modules_->remove(name);
    if (!st) {
      spdlog::error("Failed to unload kernel module {}: {}", name, st.error().message);
      return st;
    }
    spdlog::info("Successfully unloaded {} driver", name);
    return {};
  }

  Status unmount_driver_root() override {
    const std::string root = path(kDriverRoot);
    if (!path_exists(root)) {
      spdlog::info("Driver root directory does not exist, nothing to unmount");
      return {};
    }
    auto done = unmount_tree(root);
    if (!done) return done.error();
    for (const auto& t : *done) spdlog::debug("Unmounted {}", t);
    spdlog::info("Successfully unmounted {} and all its submounts", kDriverRoot);
    return {};
  }

  void remove_pid_file() override {
    const std::string pid_file = path(kDriverPidFile);
    if (::unlink(pid_file.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("Failed to remove PID file {}: {}", pid_file, errno_text(errno));
    }
  }

  [[nodiscard]] Result<std::optional<std::string>> read_driver_state() const override {
    auto r = read_text_file_if_exists(path(kDriverStateFile));
    if (!r) return r.error().wrap("cannot read the driver state file");
    return r;
  }

  std::optional<std::string> host_driver_version() override {
    std::vector<std::string> argv;
    if (root_.empty()) {
      argv = {"chroot", "/host", "nvidia-smi"};
    } else {
      const std::string smi = path("/host/usr/bin/nvidia-smi");
      if (!path_exists(smi)) return std::nullopt;
      argv = {smi};
    }
    argv.emplace_back("--query-gpu=driver_version");
    argv.emplace_back("--format=csv,noheader");
    const CommandResult r = run_process(argv, StderrMode::kDiscard);
    const std::string_view out = trim(r.output);
    if (r.exit_code != 0 || out.empty()) {
      spdlog::debug("No pre-installed host driver ({} exited with {})", argv.front(), r.exit_code);
      return std::nullopt;
    }
    // One line per GPU; they all report the same driver.
    return std::string(trim(out.substr(0, out.find('\n'))));
  }

  [[nodiscard]] std::optional<std::string> first_mellanox_device() const override {
    const std::string dir = path("/sys/bus/pci/devices");
    auto devices = list_dir(dir);
    if (!devices) {
      spdlog::warn("Cannot look for Mellanox devices: {}", devices.error().message);
      return std::nullopt;
    }
    for (const auto& bdf : *devices) {
      auto vendor = read_text_file(fmt::format("{}/{}/vendor", dir, bdf));
      if (vendor && trim(*vendor) == kMellanoxVendor) return bdf;
    }
    return std::nullopt;
  }

  [[nodiscard]] bool mofed_ready(Mofed mofed) const override {
    if (mofed == Mofed::kHost) {
      auto text = modules_->proc_modules();
      return text && text->find("mlx5_core") != std::string::npos;
    }
    return path_exists(path(kMofedReadyFile));
  }

  CommandResult run(const std::vector<std::string>& argv) override { return run_process(argv); }

 private:
  // Whether read_stack looks for the processes that have the modules' device files open (a /proc scan).
  enum class Holders { kSkip, kFind };
  // The loaded (or built-in) members of kNvidiaModules, in that order, each (with kFind) with the processes
  // that have its device files open.
  [[nodiscard]] Result<std::vector<ModuleState>> read_stack(Holders holders) const {
    std::vector<ModuleState> stack;
    for (const auto name : kNvidiaModules) {
      auto st = modules_->state(name);
      if (!st) return st.error().wrap("cannot inspect kernel module " + std::string(name));
      if (st->loaded || st->builtin) stack.push_back(std::move(st).value());
    }
    if (stack.empty() || holders == Holders::kSkip) return stack;
    for (const auto& p : modules_->holder_processes()) {
      for (auto& m : stack) {
        if (std::find(p.modules.begin(), p.modules.end(), m.name) != p.modules.end())
          m.users.push_back(p.label());
      }
    }
    return stack;
  }

  std::string root_;
  std::unique_ptr<ModuleBackend> modules_;
};

}  // namespace

std::unique_ptr<Host> make_host(const std::string& sim_root) {
  if (sim_root.empty()) return std::make_unique<HostImpl>("", make_kernel_backend());
  std::string root = std::filesystem::absolute(sim_root).lexically_normal().string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root == "/") return std::make_unique<HostImpl>("", make_kernel_backend());
  return std::make_unique<HostImpl>(root, make_sim_module_backend(root));
}

bool driver_config_matches(std::string_view desired_digest, std::string_view state_file_content) {
  return desired_digest == trim(state_file_content);
}

Status wait_for_mofed(const Host& host, Mofed mofed, const Clock& clock, Deadline deadline,
                      const CancelToken& cancel, Duration interval) {
  const TimePoint start = clock.now();
  const std::string what = mofed == Mofed::kHost
                               ? std::string("kernel module mlx5_core to be loaded (USE_HOST_MOFED)")
                               : "file " + std::string(kMofedReadyFile);
  for (;;) {
    if (host.mofed_ready(mofed)) {
      spdlog::info("MOFED driver is ready (waited {})",
                   format_duration(clock.now() - start, DurationStyle::kSeconds));
      return {};
    }
    if (cancel.cancelled()) return Error("interrupted while waiting for the MOFED driver (" + what + ")");
    if (deadline.passed(clock)) {
      return Error("MOFED driver not ready after " +
                   format_duration(clock.now() - start, DurationStyle::kSeconds) + ": still waiting for " +
                   what + "; check the MOFED driver pod on this node");
    }
    if (deadline.unlimited()) {
      spdlog::info("Waiting for MOFED to be installed... (waiting for {}, elapsed {})", what,
                   format_duration(clock.now() - start, DurationStyle::kSeconds));
    } else {
      spdlog::info("Waiting for MOFED to be installed... (waiting for {}, elapsed {}, timeout in {})", what,
                   format_duration(clock.now() - start, DurationStyle::kSeconds),
                   format_duration(deadline.remaining(clock), DurationStyle::kSeconds));
    }
    if (!clock.sleep_for(std::min(interval, deadline.remaining(clock)), cancel)) {
      return Error("interrupted while waiting for the MOFED driver (" + what + ")");
    }
  }
}

}  // namespace dm::host
