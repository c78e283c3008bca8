#include "manager/rules/labels.h"

namespace dm::manager {

std::string pause_value(std::string_view v) {
  if (v.empty() || v == "false") return std::string(v);
  if (v == "true") return std::string(kPausedMarker);
  if (is_paused_value(v)) return std::string(v);
  return std::string(v) + "_" + std::string(kPausedMarker);
}

std::string upstream_restore_value(std::string_view v) {
  if (v == "false") return "false";
  if (v == kPausedMarker) return "true";
  std::string out;
  size_t i = 0;
  while (i < v.size()) {
    if (v.substr(i, kPausedMarker.size()) == kPausedMarker) {
      i += kPausedMarker.size();
      if (i < v.size() && v[i] == '_') ++i;
      continue;
    }
    out.push_back(v[i]);
    ++i;
  }
  const auto first = out.find_first_not_of('_');
  if (first == std::string::npos) return {};
  const auto last = out.find_last_not_of('_');
  return out.substr(first, last - first + 1);
}

bool is_paused_value(std::string_view v) {
  return v.find(kPausedMarker) != std::string_view::npos;
}

std::string restore_value(std::string_view snapshot) {
  // A value we paused is written back verbatim; only a marker left behind by a crashed run needs
  // upstream's transform to turn back into the operator's value.
  if (is_paused_value(snapshot)) return upstream_restore_value(snapshot);
  return std::string(snapshot);
}

}  // namespace dm::manager
