// Booleans of the environment and of annotations (common/go_bool.h, cli/options): Go's strconv.ParseBool.
// Differential: exactly Go's twelve spellings are accepted, and both readers agree.
#include <array>

#include "cli/options.h"
#include "common/go_bool.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr std::array<std::string_view, 6> kTrue = {"1", "t", "T", "TRUE", "true", "True"};
  static constexpr std::array<std::string_view, 6> kFalse = {"0", "f", "F", "FALSE", "false", "False"};
  const std::string_view s = dm::fuzz::text(data, size);
  std::optional<bool> expected;
  for (auto t : kTrue) expected = s == t ? std::optional(true) : expected;
  for (auto f : kFalse) expected = s == f ? std::optional(false) : expected;
  if (dm::parse_go_bool(s) != expected) dm::fuzz::fail("parse_go_bool");
  const auto value = dm::cli::parse_bool_value(s);
  if (value.ok() != expected.has_value() || (value && *value != *expected))
    dm::fuzz::fail("parse_bool_value");
  if (dm::go_true(s) != expected.value_or(false)) dm::fuzz::fail("go_true");
  return 0;
}
