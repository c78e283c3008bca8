// NVIDIA PCI devices from sysfs (<sysfs>/bus/pci/devices), as go-nvlib's nvpci sees them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::vfio {

inline constexpr uint32_t kNvidiaVendor = 0x10de;
inline constexpr uint32_t kClassVga = 0x030000;
inline constexpr uint32_t kClass3d = 0x030200;
inline constexpr uint32_t kClassNvSwitch = 0x068000;

struct PciDevice {
  std::string bdf;  // "0000:3b:00.0"
  std::string dir;  // <sysfs>/bus/pci/devices/<bdf>
  uint32_t vendor = 0;
  uint32_t device = 0;
  uint32_t pci_class = 0;
  bool virtual_function = false;  // SR-IOV VF (has a physfn link)

  [[nodiscard]] bool nvidia() const { return vendor == kNvidiaVendor; }
  [[nodiscard]] bool gpu() const { return pci_class == kClassVga || pci_class == kClass3d; }
  [[nodiscard]] bool nvswitch() const { return pci_class == kClassNvSwitch; }
  [[nodiscard]] bool vga() const { return pci_class == kClassVga; }
};

// "dddd:bb:dd.f" (hex domain, bus, device; function 0-7).
bool valid_bdf(std::string_view bdf);

// The device at <devices_dir>/<bdf>; error if it does not exist or its vendor/class cannot be read.
Result<PciDevice> read_pci_device(const std::string& devices_dir, const std::string& bdf);

// NVIDIA GPUs (without SR-IOV VFs) and, if include_nvswitches, NVSwitches, sorted by BDF.
Result<std::vector<PciDevice>> list_nvidia_devices(const std::string& devices_dir, bool include_nvswitches);

// Name of the driver bound to the device (basename of its "driver" link), or "" if none.
std::string current_driver(const PciDevice& dev);

// The graphics auxiliary function (e.g. HD audio) of a VGA GPU: a "consumer:pci:<bdf>" entry in the
// device directory naming an existing device.
std::optional<PciDevice> auxiliary_device(const std::string& devices_dir, const PciDevice& dev);

}  // namespace dm::vfio
