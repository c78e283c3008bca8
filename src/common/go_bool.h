// Go's strconv.ParseBool, the one reading of a boolean for environment variables and annotations (upstream
// parses both with it): 1 t T TRUE true True / 0 f F FALSE false False; nullopt for anything else.
#pragma once

#include <optional>
#include <string_view>

namespace dm {

inline std::optional<bool> parse_go_bool(std::string_view s) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") return false;
  return std::nullopt;
}

// The value parses as Go-bool true.
inline bool go_true(std::string_view s) {
  return parse_go_bool(s).value_or(false);
}

}  // namespace dm
