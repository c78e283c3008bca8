#include "vfio/vfio.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "host/fs_util.h"
#include "vfio/modalias.h"

namespace dm::vfio {
namespace {

std::string_view verb(Action a) {
  return a == Action::kBind ? "bind" : "unbind";
}

}  // namespace

VfioManager::VfioManager(const host::Host& host, host::CommandRunner& runner, VfioConfig config)
    : host_(host), runner_(runner), config_(std::move(config)) {}

std::string VfioManager::devices_dir() const {
  return host_.path("/sys/bus/pci/devices");
}
std::string VfioManager::drivers_dir() const {
  return host_.path("/sys/bus/pci/drivers");
}

Result<std::string> VfioManager::choose_module(const PciDevice& dev) const {
  auto modalias_text = host::read_text_file(dev.dir + "/modalias");
  if (!modalias_text) return modalias_text.error().wrap("cannot choose a vfio driver for " + dev.bdf);
  const auto modalias = parse_modalias(host::trim(*modalias_text));
  if (!modalias) {
    return Error("cannot choose a vfio driver for " + dev.bdf + ": malformed modalias \"" +
                 std::string(host::trim(*modalias_text)) + "\"");
  }
  const std::string alias_file = host_.path("/lib/modules/" + config_.kernel_release + "/modules.alias");
  auto aliases_text = host::read_text_file_if_exists(alias_file);
  if (!aliases_text) {
    spdlog::warn("Cannot read {}, using {}: {}", alias_file, kDefaultVfioDriver,
                 aliases_text.error().message);
    return std::string(kDefaultVfioDriver);
  }
  if (!aliases_text->has_value()) {
    spdlog::debug("{} does not exist, using {}", alias_file, kDefaultVfioDriver);
    return std::string(kDefaultVfioDriver);
  }
  return match_vfio_module(*modalias, parse_vfio_aliases(**aliases_text));
}

Status VfioManager::load_module(const std::string& module) {
  std::vector<std::string> argv;
  if (config_.simulated) {
    const std::string modprobe = host_.path("/sbin/modprobe");
    if (!host::path_exists(modprobe)) {
      spdlog::info("Simulated host: not loading kernel module {} (no {})", module, modprobe);
      return {};
    }
    argv = {modprobe, module};
  } else {
    argv = {"chroot", config_.host_root, "modprobe", module};
  }
  const host::CommandResult r = runner_.run(argv);
  if (r.exit_code != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    return Error("failed to load kernel module " + module + " (`" + cmd + "` exited with " +
                 std::to_string(r.exit_code) + "): " + std::string(host::trim(r.output)));
  }
  return {};
}

Result<std::string> VfioManager::driver_name(const std::string& module) const {
  if (host::path_exists(drivers_dir() + "/" + module)) return module;
  std::string dashed = module;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  if (host::path_exists(drivers_dir() + "/" + dashed)) return dashed;
  return Error("driver directory " + drivers_dir() + "/" + module + " (or " + dashed +
               ") does not exist: is the module " + module + " loaded?");
}

Status VfioManager::unbind_one(const PciDevice& dev) {
  spdlog::info("Unbinding device {}", dev.bdf);
  // A newline clears the override, so that the next probe may pick a host driver again.
  auto st = host::write_existing_file(dev.dir + "/driver_override", "\n");
  if (!st) return st.error().wrap("cannot clear driver_override of " + dev.bdf);
  if (!host::path_exists(dev.dir + "/driver")) return {};
  const std::string from = current_driver(dev);
  st = host::write_existing_file(dev.dir + "/driver/unbind", dev.bdf);
  if (!st) return st.error().wrap("cannot unbind " + dev.bdf + " from driver " + from);
  return {};
}

Status VfioManager::bind_to(const PciDevice& dev, const std::string& driver) {
  if (current_driver(dev) == driver) {
    spdlog::info("Device {} is already bound to driver: {}", dev.bdf, driver);
    return {};
  }
  auto st = unbind_one(dev);
  if (!st) return st;
  spdlog::info("Binding device {} to driver: {}", dev.bdf, driver);
  st = host::write_existing_file(dev.dir + "/driver_override", driver);
  if (!st) return st.error().wrap("cannot set driver_override of " + dev.bdf);
  st = host::write_existing_file(drivers_dir() + "/" + driver + "/bind", dev.bdf);
  if (!st) return st.error().wrap("cannot bind " + dev.bdf + " to driver " + driver);
  return {};
}

Status VfioManager::bind(const PciDevice& dev) {
  spdlog::info("Binding device {}", dev.bdf);
  auto module = choose_module(dev);
  if (!module) return module.error();
  auto st = load_module(*module);
  if (!st) return st;
  auto driver = driver_name(*module);
  if (!driver) return driver.error();
  st = bind_to(dev, *driver);
  if (!st) return st;
  if (dev.vga()) {
    if (auto aux = auxiliary_device(devices_dir(), dev)) {
      st = bind_to(*aux, *driver);
      if (!st) return st.error().wrap("auxiliary device of " + dev.bdf);
    }
  }
  return {};
}

Status VfioManager::unbind(const PciDevice& dev) {
  auto st = unbind_one(dev);
  if (!st) return st;
  if (dev.vga()) {
    if (auto aux = auxiliary_device(devices_dir(), dev)) {
      st = unbind_one(*aux);
      if (!st) return st.error().wrap("auxiliary device of " + dev.bdf);
    }
  }
  return {};
}

int VfioManager::run_one(Action action, const std::string& bdf) {
  auto dev = read_pci_device(devices_dir(), bdf);
  if (!dev) {
    spdlog::critical("failed to get NVIDIA device: {}", dev.error().message);
    return 1;
  }
  if (!dev->nvidia()) {
    spdlog::info("Device {} is not an NVIDIA device", bdf);
    return 0;
  }
  if (dev->nvswitch() && !config_.include_nvswitches) {
    spdlog::info(
        "Device {} is an NVSwitch and NVSwitch handling is disabled (--{}-nvswitches, BIND_NVSWITCHES), "
        "skipping",
        bdf, verb(action));
    return 0;
  }
  if (!dev->gpu() && !dev->nvswitch()) {
    spdlog::info("Device {} is neither an NVIDIA GPU nor an NVSwitch (class 0x{:06x}), skipping", bdf,
                 dev->pci_class);
    return 0;
  }
  const Status st = action == Action::kBind ? bind(*dev) : unbind(*dev);
  if (!st) {
    spdlog::critical("failed to {} device {}: {}", verb(action), bdf, st.error().message);
    return 1;
  }
  return 0;
}

int VfioManager::run(Action action, const std::optional<std::string>& device_id) {
  if (device_id) return run_one(action, *device_id);

  // On the real machine the PCI bus directory always exists; a simulated tree may have no PCI devices.
  if (!config_.simulated && !host::path_exists(devices_dir())) {
    spdlog::critical("failed to get NVIDIA devices: {} does not exist", devices_dir());
    return 1;
  }
  auto devices = list_nvidia_devices(devices_dir(), config_.include_nvswitches);
  if (!devices) {
    spdlog::critical("failed to get NVIDIA devices: {}", devices.error().message);
    return 1;
  }
  if (devices->empty()) spdlog::info("No NVIDIA devices found in {}", devices_dir());
  for (const auto& dev : *devices) {
    const Status st = action == Action::kBind ? bind(dev) : unbind(dev);
    if (!st) spdlog::warn("Failed to {} device {}: {}", verb(action), dev.bdf, st.error().message);
  }
  return 0;
}

}  // namespace dm::vfio
