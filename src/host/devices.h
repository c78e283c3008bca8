// The processes holding the NVIDIA driver: every open file of a process that is a character device of an
// NVIDIA module, recognised by its device number (major from /proc/devices), not by its path - paths differ
// inside containers, and /dev/nvidia-caps/* or /dev/nvidia-nvswitch* are easy to miss by name.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::host {

// Character-device majors of the NVIDIA modules, and which module owns a device number.
class NvidiaDevices {
 public:
  // From the text of /proc/devices (its "Character devices:" section): nvidia/nvidiactl, nvidia-caps,
  // nvidia-caps-imex-channels, nvidia-nvswitch and nvidia-nvlink belong to `nvidia`, nvidia-uvm to
  // `nvidia_uvm`; /dev/nvidia-modeset is minor 254 of nvidia's major and belongs to `nvidia_modeset`.
  static NvidiaDevices parse(std::string_view proc_devices);

  // The module owning a character device, or "" if it is not an NVIDIA device.
  [[nodiscard]] std::string module_of(dev_t rdev) const;
  [[nodiscard]] bool empty() const { return module_of_major_.empty(); }

 private:
  std::map<unsigned, std::string> module_of_major_;
  unsigned nvidia_major_ = 0;  // 0: none
};

// A process with NVIDIA device files open.
struct HolderProcess {
  int pid = 0;
  std::string comm;                         // from /proc/<pid>/comm ("?" if unreadable)
  std::string pod_uid;                      // from /proc/<pid>/cgroup; "" = not in a Kubernetes pod
  std::vector<std::string> modules;         // the modules whose device files it has open, sorted
  [[nodiscard]] std::string label() const;  // "pid 4242 (python3)"
};

// Scans <proc_root>/<pid>/fd/* (stat follows each link to the open file) for character devices of
// `devices`. Processes that vanish or cannot be inspected are skipped; sorted by pid.
std::vector<HolderProcess> find_holder_processes(const std::string& proc_root, const NvidiaDevices& devices);

}  // namespace dm::host
