// PCI modaliases and the vfio_pci lines of modules.alias (vfio/modalias): the first line of the input is
// a device's modalias, the rest a modules.alias file. A device always matches itself as a pattern.
#include <algorithm>

#include "fuzz_support.h"
#include "vfio/modalias.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = dm::fuzz::text(data, size);
  const size_t nl = text.find('\n');
  const auto device = dm::vfio::parse_modalias(text.substr(0, nl));
  const auto aliases =
      dm::vfio::parse_vfio_aliases(nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1));
  if (!device) return 0;
  if (!dm::vfio::alias_matches(*device, *device)) dm::fuzz::fail("a device does not match itself");
  const std::string module = dm::vfio::match_vfio_module(*device, aliases);
  if (module != dm::vfio::kDefaultVfioDriver &&
      std::none_of(aliases.begin(), aliases.end(), [&](const auto& a) { return a.module == module; }))
    dm::fuzz::fail("a module no alias names");
  return 0;
}
