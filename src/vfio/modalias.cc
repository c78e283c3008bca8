#include "vfio/modalias.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace dm::vfio {
namespace {

constexpr std::array<std::string_view, 7> kMarkers = {"v", "d", "sv", "sd", "bc", "sc", "i"};

bool valid_value(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return c == '*' || std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

std::optional<Modalias> parse_modalias(std::string_view text) {
  constexpr std::string_view kPci = "pci:";
  if (text.substr(0, kPci.size()) == kPci) text.remove_prefix(kPci.size());
  // Values are upper-case hex or '*', so the lower-case markers cannot occur inside them.
  Modalias m;
  size_t pos = 0;
  for (size_t i = 0; i < kMarkers.size(); ++i) {
    if (text.substr(pos, kMarkers[i].size()) != kMarkers[i]) return std::nullopt;
    const size_t start = pos + kMarkers[i].size();
    const size_t end = i + 1 < kMarkers.size() ? text.find(kMarkers[i + 1], start) : text.size();
    if (end == std::string_view::npos) return std::nullopt;
    std::string value(text.substr(start, end - start));
    if (!valid_value(value)) return std::nullopt;
    std::transform(value.begin(), value.end(), value.begin(),
                   [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); });
    m.fields[i] = std::move(value);
    pos = end;
  }
  return m;
}

std::vector<VfioAlias> parse_vfio_aliases(std::string_view modules_alias) {
  constexpr std::string_view kPrefix = "vfio_pci:";
  std::vector<VfioAlias> aliases;
  std::istringstream in{std::string(modules_alias)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string keyword, pattern, module;
    if (!(words >> keyword >> pattern >> module) || keyword != "alias") continue;
    if (pattern.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    auto parsed = parse_modalias(std::string_view(pattern).substr(kPrefix.size()));
    if (parsed) aliases.push_back({std::move(*parsed), module});
  }
  return aliases;
}

bool alias_matches(const Modalias& pattern, const Modalias& device) {
  for (size_t i = 0; i < pattern.fields.size(); ++i) {
    if (pattern.fields[i] != "*" && pattern.fields[i] != device.fields[i]) return false;
  }
  return true;
}

std::string match_vfio_module(const Modalias& device, const std::vector<VfioAlias>& aliases) {
  const VfioAlias* best = nullptr;
  long best_wildcards = 0;
  for (const auto& a : aliases) {
    if (!alias_matches(a.pattern, device)) continue;
    const long wildcards = std::count(a.pattern.fields.begin(), a.pattern.fields.end(), "*");
    if (best == nullptr || wildcards < best_wildcards) {
      best = &a;
      best_wildcards = wildcards;
    }
  }
  return best != nullptr ? best->module : std::string(kDefaultVfioDriver);
}

}  // namespace dm::vfio
