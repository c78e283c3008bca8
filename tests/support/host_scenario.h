// How a host contract case sets up its node (docs/host-contract.md): the NVIDIA stub modules loaded,
// processes holding their device files (optionally in a pod's cgroup), the driver root mounted, a mount held
// busy. Two implementations: the simulated host of docs/simulated-host.md under a temporary root
// (make_sim_scenario) and the real kernel of the test guest (make_kernel_scenario: tests/kernel/guest, the
// stub modules of tests/kernel/modules in /lib/modules/stub). Each gives the dm::host::Host under test:
// make_host(DIR) for the simulation, make_host("") - the real host layer - for the kernel.
//
// Setup steps throw std::runtime_error when the node cannot be set up as asked (a module that does not load,
// a device that does not open): a case then fails naming the step, never asserts on a half-made node.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/host.h"

namespace dm::test::host_contract {

// Every module a case can load: the stub modules, and `drm`, the kernel's own DRM core (nvidia_drm needs it).
inline constexpr std::string_view kStubModules[] = {
    "nvidia",         "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_vgpu_vfio",
    "nvidia_peermem", "nvidia_fs",  "gdrdrv",         "nouveau",    "gpu_mon"};

// The modules a module depends on (a holders link on each, as /sys/module/<dep>/holders/<m> shows it).
std::vector<std::string> dependencies_of(std::string_view module);

struct LoadOptions {
  bool frontend = false;           // nvidia registers major 195 as `nvidia-frontend` (drivers up to 535)
  int modeset_pins = 0;            // nvidia_modeset takes this many references on nvidia without a link
  bool permanent_peermem = false;  // the nvidia_peermem without an exit function ("[permanent]")
  // nvidia_drm's DRM device on nvidia's GPU device (the real module's shape: its driver is nvidia's), not on
  // a device of its own driver (gpu_parent=1)
  bool drm_on_gpu = false;
};

// A pod's cgroup as the kubelet makes it, relative to the cgroup2 root, and the pod UID it names.
struct PodCgroup {
  std::string uid;
  std::string path;
};
// The systemd driver: kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid, _ for
// ->.slice/cri-containerd-<container>.scope.
PodCgroup systemd_pod(const std::string& uid, const std::string& container_id);
// The cgroupfs driver: kubepods/besteffort/pod<uid>/<container>.
PodCgroup cgroupfs_pod(const std::string& uid, const std::string& container_id);

// A process holding device files open.
struct Holder {
  int pid = 0;
  std::string comm;
  [[nodiscard]] std::string label() const { return "pid " + std::to_string(pid) + " (" + comm + ")"; }
};

// A real process whose working directory and one open file are inside a mount.
struct BusyMount {
  pid_t pid = -1;
  int fd = -1;                     // its open file, readable through /proc/<pid>/fd/<fd>
  static constexpr int kFd = 100;  // the descriptor the file is kept open as
  static constexpr std::string_view kContent = "busy\n";  // what the file holds
};

class HostScenario {
 public:
  HostScenario() = default;
  virtual ~HostScenario() = default;
  HostScenario(const HostScenario&) = delete;
  HostScenario& operator=(const HostScenario&) = delete;

  // "sim" or "kernel", for messages.
  [[nodiscard]] virtual std::string name() const = 0;
  virtual host::Host& host() = 0;

  // Loads `modules` in the order given (each after the modules it depends on).
  virtual void load(const std::vector<std::string>& modules, const LoadOptions& options = {}) = 0;
  // Removes one module behind the Host's back, as rmmod does.
  virtual void rmmod(const std::string& module) = 0;
  // The kernel's module list now: the text of /proc/modules.
  [[nodiscard]] virtual std::string proc_modules() = 0;

  // A process named `comm` with each of `devices` (host paths: "/dev/nvidia0") open, in `pod`'s cgroup if
  // given, else in the root cgroup.
  virtual Holder start_holder(const std::string& comm, const std::vector<std::string>& devices,
                              const std::optional<PodCgroup>& pod = std::nullopt) = 0;
  // The holder exits; its device files are closed (and its references dropped) when this returns.
  virtual void stop_holder(const Holder& holder) = 0;
  // This process's own cgroup becomes `pod`'s (what /proc/self/cgroup says).
  virtual void enter_pod(const PodCgroup& pod) = 0;

  // Mounts are real on both sides (the simulation's are under its root, in a private mount namespace).
  // A tmpfs on the driver root, and one on each of `submounts` (relative to it, parents first).
  void mount_driver_root(const std::vector<std::string>& submounts);
  // A real process with its working directory and an open file in `host_dir` (a host path).
  BusyMount hold_busy(const std::string& host_dir);
  // What the busy process reads from its open file now.
  [[nodiscard]] std::string read_busy_file(const BusyMount& busy) const;
  // The mount points at or below the driver root, from this process's /proc/self/mountinfo.
  [[nodiscard]] std::vector<std::string> mounts_under_driver_root();

 protected:
  // Forks a child that runs `body` (which returns "" when it is set up, else what went wrong) and then
  // waits to be killed; returns its pid, or throws with the child's words. Every such child is killed by
  // release_processes_and_mounts().
  pid_t start_child(const std::string& what, const std::function<std::string()>& body);
  // Kills and reaps one child started by start_child.
  void kill_child(pid_t pid);
  // Kills every child still running and unmounts everything at or below the driver root; each
  // implementation's destructor calls it first.
  void release_processes_and_mounts();

 private:
  std::vector<pid_t> children_;
};

std::unique_ptr<HostScenario> make_sim_scenario();
// Only inside the test guest (throws elsewhere): the stub modules must be in /lib/modules/stub.
std::unique_ptr<HostScenario> make_kernel_scenario();

// The module names of a /proc/modules text, in its order.
std::vector<std::string> module_names(std::string_view proc_modules);

// Whole file (throws when it cannot be read); a file written whole, its directories made first.
std::string read_text(const std::string& path);
void write_text(const std::string& path, std::string_view content);

}  // namespace dm::test::host_contract
