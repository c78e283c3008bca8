// vfio-manage's work (docs/behaviour.md, vfio-manage): bind NVIDIA GPUs (and optionally NVSwitches) to their
// vfio driver, or unbind them, on the sysfs of a Host (the real one, or a simulated tree).
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "host/host.h"
#include "vfio/pci.h"

namespace dm::vfio {

enum class Action { kBind, kUnbind };

struct VfioConfig {
  std::string host_root = "/";      // chroot for modprobe (HOST_ROOT)
  bool include_nvswitches = false;  // --bind-nvswitches / --unbind-nvswitches / BIND_NVSWITCHES
  bool simulated = false;           // modprobe is not run through chroot on a simulated host
  std::string kernel_release;       // $(uname -r), for /lib/modules/<release>/modules.alias
};

class VfioManager {
 public:
  // Files go through `host`; modprobe runs through `runner` (usually the same host).
  VfioManager(const host::Host& host, host::CommandRunner& runner, VfioConfig config);

  // The whole command: every GPU (--all, device_id empty) or one device; returns the exit code and logs
  // every decision. With --all per-device failures are warnings (exit 0); with a device id they exit 1.
  int run(Action action, const std::optional<std::string>& device_id);

  // Binds one device (and a VGA GPU's auxiliary function) to its vfio driver.
  Status bind(const PciDevice& dev);
  // Clears driver_override and unbinds the device (and a VGA GPU's auxiliary function) from any driver.
  Status unbind(const PciDevice& dev);
  // The vfio module for the device according to modules.alias (vfio-pci when nothing matches).
  [[nodiscard]] Result<std::string> choose_module(const PciDevice& dev) const;

 private:
  [[nodiscard]] std::string devices_dir() const;
  [[nodiscard]] std::string drivers_dir() const;
  Status load_module(const std::string& module);
  [[nodiscard]] Result<std::string> driver_name(const std::string& module) const;
  Status bind_to(const PciDevice& dev, const std::string& driver);
  Status unbind_one(const PciDevice& dev);
  int run_one(Action action, const std::string& bdf);

  const host::Host& host_;
  host::CommandRunner& runner_;
  VfioConfig config_;
};

}  // namespace dm::vfio
