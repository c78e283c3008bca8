// The processes holding the NVIDIA driver: every open file of a process that is a character device of an
// NVIDIA module, recognised by its device number (major from /proc/devices), not by its path - paths differ
// inside containers, and /dev/nvidia-caps/* or /dev/nvidia-nvswitch* are easy to miss by name. A DRM node
// (/dev/dri/card*, /dev/dri/renderD*) shares its major with every DRM driver, so it is attributed through
// sysfs instead: the driver its device is bound to.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::host {

// Character-device majors of the NVIDIA modules, and which module owns a device number.
class NvidiaDevices {
 public:
  // From the text of /proc/devices (its "Character devices:" section): nvidia/nvidiactl (nvidia-frontend
  // on drivers up to 535), nvidia-caps, nvidia-caps-imex-channels, nvidia-nvswitch and nvidia-nvlink belong
  // to `nvidia`, nvidia-uvm to `nvidia_uvm`; /dev/nvidia-modeset is minor 254 of nvidia's major and belongs
  // to `nvidia_modeset`. The major named `drm` is remembered as the DRM major (see drm_module_of).
  static NvidiaDevices parse(std::string_view proc_devices);

  // The module owning a character device of an NVIDIA major, or "" if it has none (a DRM node included).
  [[nodiscard]] std::string module_of(dev_t rdev) const;
  // Whether a character device is a DRM node (major `drm`), whichever driver serves it.
  [[nodiscard]] bool is_drm(dev_t rdev) const;
  // No NVIDIA major: the NVIDIA driver is not loaded, nothing can hold it.
  [[nodiscard]] bool empty() const { return module_of_major_.empty(); }

 private:
  std::map<unsigned, std::string> module_of_major_;
  std::set<unsigned> drm_majors_;
  unsigned nvidia_major_ = 0;  // 0: none
};

// The module of the NVIDIA stack serving the DRM node `rdev`, from
// <sys_root>/dev/char/<major>:<minor>/device/driver/module (a symlink whose basename is the module bound to
// the device): "nvidia_drm" when that module is `nvidia` (a GPU's DRM nodes are nvidia_drm's, their parent
// is the PCI device nvidia drives) or nvidia_drm itself, another member of kNvidiaModules as named; "" when
// the link is missing or names a module outside the stack (another GPU's DRM driver).
std::string drm_module_of(const std::string& sys_root, dev_t rdev);

// A process with NVIDIA device files open.
struct HolderProcess {
  int pid = 0;
  std::string comm;                         // from /proc/<pid>/comm ("?" if unreadable)
  std::string pod_uid;                      // from /proc/<pid>/cgroup; "" = not in a Kubernetes pod
  std::vector<std::string> modules;         // the modules whose device files it has open, sorted
  [[nodiscard]] std::string label() const;  // "pid 4242 (python3)"
};

// Scans <proc_root>/<pid>/fd/* (stat follows each link to the open file) for character devices of
// `devices`, and DRM nodes of the NVIDIA stack (drm_module_of under `sys_root`, each distinct device number
// resolved once per scan). Processes that vanish or cannot be inspected are skipped; sorted by pid.
std::vector<HolderProcess> find_holder_processes(const std::string& proc_root, const std::string& sys_root,
                                                 const NvidiaDevices& devices);

}  // namespace dm::host
