// PCI modalias parsing and the choice of a vfio driver from modules.alias (see docs/behaviour.md,
// vfio-manage).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dm::vfio {

inline constexpr std::string_view kDefaultVfioDriver = "vfio-pci";

// The seven fields of "pci:v<V>d<D>sv<SV>sd<SD>bc<BC>sc<SC>i<I>" (vendor, device, subsystem vendor,
// subsystem device, base class, subclass, interface) in the kernel's upper-case hex; in patterns a field may
// be "*".
struct Modalias {
  std::array<std::string, 7> fields;
};

// Parses a device modalias ("pci:v...") or an alias pattern ("v...", after "vfio_pci:"); nullopt if
// malformed.
std::optional<Modalias> parse_modalias(std::string_view text);

// One "alias vfio_pci:<pattern> <module>" line of modules.alias.
struct VfioAlias {
  Modalias pattern;
  std::string module;
};

// The vfio_pci aliases of a modules.alias file, in file order; other lines are ignored.
std::vector<VfioAlias> parse_vfio_aliases(std::string_view modules_alias);

// Each field of `pattern` is "*" or equal to the device's (partial wildcards compare literally).
bool alias_matches(const Modalias& pattern, const Modalias& device);

// The module of the matching alias with the fewest "*" fields (the first in file order on ties), or
// kDefaultVfioDriver when nothing matches.
std::string match_vfio_module(const Modalias& device, const std::vector<VfioAlias>& aliases);

}  // namespace dm::vfio
