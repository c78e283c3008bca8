// What vfio-manage reads of a PCI device in sysfs (vfio/pci): the vendor, device and class files (parts
// of the input between "\n---\n" lines), and a BDF given on the command line (the fourth part).
#include <filesystem>

#include "fuzz_support.h"
#include "vfio/pci.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = dm::fuzz::split(dm::fuzz::text(data, size), "\n---\n");
  const auto part = [&](size_t i) { return i < parts.size() ? parts[i] : std::string_view(); };
  const std::string devices = dm::fuzz::scratch_dir() + "/devices";
  const std::string dir = devices + "/0000:3b:00.0";
  static const bool made = std::filesystem::create_directories(dir);
  (void)made;
  dm::fuzz::write_file(dir + "/vendor", part(0));
  dm::fuzz::write_file(dir + "/device", part(1));
  dm::fuzz::write_file(dir + "/class", part(2));
  (void)dm::vfio::valid_bdf(part(3));
  const auto dev = dm::vfio::read_pci_device(devices, "0000:3b:00.0");
  if (dev) (void)dm::vfio::current_driver(*dev);
  (void)dm::vfio::list_nvidia_devices(devices, true);
  return 0;
}
