// The node itself - kernel modules, the driver root mount, state files, PCI devices, child processes -
// behind one interface, knowing nothing of Kubernetes. make_host("") is the real machine;
// make_host(DIR) the simulated one used by tests and the demo (every host path under DIR, modules
// simulated by files under DIR/sys/module and DIR/proc; mounts under DIR are real).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "host/devices.h"
#include "host/process.h"

namespace dm::host {

// Unload order (upstream's, with nvidia_drm first): dependants before `nvidia`.
inline constexpr std::string_view kNvidiaModules[] = {"nvidia_drm",     "nvidia_modeset", "nvidia_uvm",
                                                      "nvidia_peermem", "nvidia_fs",      "nvidia_vgpu_vfio",
                                                      "gdrdrv",         "nvidia"};

inline constexpr std::string_view kDriverRoot = "/run/nvidia/driver";
inline constexpr std::string_view kDriverPidFile = "/run/nvidia/nvidia-driver.pid";
inline constexpr std::string_view kDriverStateFile = "/run/nvidia/nvidia-driver.state";
inline constexpr std::string_view kMofedReadyFile = "/run/mellanox/drivers/.driver-ready";

struct ModuleState {
  std::string name;
  bool loaded = false;     // a loaded module: listed in /proc/modules (or has /sys/module/<m>/initstate)
  bool builtin = false;    // compiled into the kernel (/sys/module/<m> without initstate): never removable
  bool unloadable = true;  // false when the kernel keeps no reference count (built without module unloading)
  bool permanent = false;  // "[permanent]" in /proc/modules: an init function and no exit function, so the
                           // kernel can never unload it
  int refcount = 0;
  std::vector<std::string> holders;  // modules using it (/sys/module/<m>/holders)
  std::vector<std::string> users;    // processes with its device files open ("pid 42 (x)"), for messages
};

// Where the MOFED driver comes from: the host itself (USE_HOST_MOFED) or the MOFED driver container.
enum class Mofed { kContainer, kHost };

// The node. It is also the CommandRunner of real child processes (the runner is its own interface so a
// test that only intercepts commands substitutes just that).
class Host : public CommandRunner {
 public:
  ~Host() override = default;

  // The real path of an absolute host path ("/run/nvidia" -> "<root>/run/nvidia").
  [[nodiscard]] virtual std::string path(std::string_view host_path) const = 0;

  // Loaded iff /proc/modules lists it (or /sys/module/<name>/initstate exists); a built-in module is not.
  [[nodiscard]] virtual bool module_loaded(std::string_view name) const = 0;
  [[nodiscard]] virtual Result<ModuleState> module_state(std::string_view name) const = 0;

  // Error when the loaded NVIDIA stack can never be unloaded here - a member built into the kernel or
  // permanent, or a kernel built without module unloading - saying what the node needs; ok when nothing is
  // loaded.
  [[nodiscard]] virtual Status can_unload_nvidia() const = 0;

  // Unloads the loaded modules of kNvidiaModules, holders first, all or nothing: refcounts, holders (links
  // and kUnlinkedReferences pins) and processes with NVIDIA device files open are checked first, and if
  // anything outside the stack holds it nothing is removed and the error names what holds which module.
  // Each refcount is re-read after each removal. Logs "Unloading NVIDIA driver kernel modules" and each
  // removal; on refusal it also logs "Could not unload NVIDIA driver kernel modules, driver is in use" and
  // the nvidia_modules_table() itself (callers need not log them again).
  virtual Status unload_nvidia_modules() = 0;
  // The processes with NVIDIA device files open (found by device number), each with its pod UID.
  [[nodiscard]] virtual std::vector<HolderProcess> nvidia_holder_processes() const = 0;
  // The UID of the Kubernetes pod this program runs in, from its own cgroup (/proc/self/cgroup; under the
  // simulated root, DIR/proc/self/cgroup), nullopt when it runs in no pod or the file says none.
  [[nodiscard]] virtual std::optional<std::string> own_pod_uid() const = 0;
  // "Module Size Ref Count Used by" table of the /proc/modules lines of the NVIDIA modules: those of
  // kNvidiaModules and any other whose name contains "nvidia" (for the log).
  [[nodiscard]] virtual std::string nvidia_modules_table() const = 0;
  // Removes one module (nouveau). Error names the holders when it is in use.
  virtual Status unload_module(std::string_view name) = 0;

  // Recursively unmounts kDriverRoot, deepest first; nothing mounted (or no directory) is success.
  virtual Status unmount_driver_root() = 0;
  // Deletes kDriverPidFile; a missing file is fine, other errors are logged as warnings.
  virtual void remove_pid_file() = 0;
  // Contents of kDriverStateFile; nullopt when the file does not exist; error on other read failures.
  [[nodiscard]] virtual Result<std::optional<std::string>> read_driver_state() const = 0;

  // `chroot /host nvidia-smi --query-gpu=driver_version --format=csv,noheader`: the version if it ran
  // and printed something, else nullopt.
  virtual std::optional<std::string> host_driver_version() = 0;

  // BDF of the first PCI device with vendor 0x15b3, if any.
  [[nodiscard]] virtual std::optional<std::string> first_mellanox_device() const = 0;
  // MOFED ready: mlx5_core in /proc/modules (Mofed::kHost) or kMofedReadyFile exists (Mofed::kContainer).
  [[nodiscard]] virtual bool mofed_ready(Mofed mofed) const = 0;
};

// "" = the real machine; otherwise the simulated host rooted at sim_root.
std::unique_ptr<Host> make_host(const std::string& sim_root);

// The skip-uninstall test (docs/behaviour.md, Skip-uninstall): DRIVER_CONFIG_DIGEST (taken verbatim) equals
// the state file's content with surrounding whitespace trimmed.
bool driver_config_matches(std::string_view desired_digest, std::string_view state_file_content);

// Waits until host.mofed_ready(), logging "Waiting for MOFED to be installed..." with the elapsed time
// every `interval`; error when `deadline` passes or `cancel` fires.
Status wait_for_mofed(const Host& host, Mofed mofed, const Clock& clock, Deadline deadline,
                      const CancelToken& cancel, Duration interval = std::chrono::seconds(5));

}  // namespace dm::host
