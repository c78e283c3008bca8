#include "vfio/pci.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <filesystem>

#include "host/fs_util.h"

namespace dm::vfio {
namespace {

Result<uint32_t> read_hex(const std::string& path) {
  auto text = host::read_text_file(path);
  if (!text) return text.error();
  std::string_view v = host::trim(*text);
  if (v.substr(0, 2) == "0x" || v.substr(0, 2) == "0X") v.remove_prefix(2);
  uint32_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, 16);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    return Error("cannot parse " + path + ": \"" + std::string(host::trim(*text)) + "\" is not a hex number");
  }
  return out;
}

bool hex_run(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return false;
  for (size_t i = pos; i < pos + n; ++i) {
    if (std::isxdigit(static_cast<unsigned char>(s[i])) == 0) return false;
  }
  return true;
}

}  // namespace

bool valid_bdf(std::string_view bdf) {
  return bdf.size() == 12 && hex_run(bdf, 0, 4) && bdf[4] == ':' && hex_run(bdf, 5, 2) && bdf[7] == ':' &&
         hex_run(bdf, 8, 2) && bdf[10] == '.' && bdf[11] >= '0' && bdf[11] <= '7';
}

Result<PciDevice> read_pci_device(const std::string& devices_dir, const std::string& bdf) {
  PciDevice d;
  d.bdf = bdf;
  d.dir = devices_dir + "/" + bdf;
  if (!host::path_exists(d.dir)) return Error("device " + bdf + " not found: " + d.dir + " does not exist");
  auto vendor = read_hex(d.dir + "/vendor");
  if (!vendor) return vendor.error();
  d.vendor = *vendor;
  auto device = read_hex(d.dir + "/device");
  d.device = device ? *device : 0;
  auto cls = read_hex(d.dir + "/class");
  if (!cls) return cls.error();
  d.pci_class = *cls;
  std::error_code ec;
  d.virtual_function = std::filesystem::exists(std::filesystem::symlink_status(d.dir + "/physfn", ec));
  return d;
}

Result<std::vector<PciDevice>> list_nvidia_devices(const std::string& devices_dir, bool include_nvswitches) {
  auto names = host::list_dir(devices_dir);
  if (!names) return names.error();
  std::vector<PciDevice> out;
  for (const auto& bdf : *names) {
    auto vendor = read_hex(fmt::format("{}/{}/vendor", devices_dir, bdf));
    if (!vendor || *vendor != kNvidiaVendor) continue;
    auto dev = read_pci_device(devices_dir, bdf);
    if (!dev) return dev.error();
    if (dev->virtual_function) continue;
    if (dev->gpu() || (include_nvswitches && dev->nvswitch())) out.push_back(std::move(dev).value());
  }
  return out;
}

std::string current_driver(const PciDevice& dev) {
  std::error_code ec;
  const auto target = std::filesystem::read_symlink(dev.dir + "/driver", ec);
  if (ec) return {};
  return target.filename().string();
}

std::optional<PciDevice> auxiliary_device(const std::string& devices_dir, const PciDevice& dev) {
  constexpr std::string_view kConsumer = "consumer:pci:";
  auto entries = host::list_dir(dev.dir);
  if (!entries) return std::nullopt;
  for (const auto& e : *entries) {
    if (e.rfind(kConsumer, 0) != 0) continue;
    const std::string bdf = e.substr(kConsumer.size());
    if (!host::path_exists(fmt::format("{}/{}", devices_dir, bdf))) continue;
    auto aux = read_pci_device(devices_dir, bdf);
    if (aux) return std::move(aux).value();
  }
  return std::nullopt;
}

}  // namespace dm::vfio
