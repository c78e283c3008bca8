// Durations as the environment and flags give them (cli/options): Go's time.ParseDuration syntax and the
// bare number of seconds beyond it. Round trip: Go's rendering of a parsed duration parses back to it; the
// lenient reading agrees with Go's wherever Go's succeeds.
#include "cli/options.h"
#include "common/duration_text.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view s = dm::fuzz::text(data, size);
  const auto go = dm::cli::parse_go_duration(s);
  const auto lenient = dm::cli::parse_duration_or_seconds(s);
  if (go && (!lenient || *lenient != *go)) dm::fuzz::fail("the lenient reading differs from Go's");
  if (go) {
    const std::string shown = dm::format_duration(*go, dm::DurationStyle::kGo);
    const auto back = dm::cli::parse_go_duration(shown);
    if (!back || *back != *go) dm::fuzz::fail("\"" + shown + "\" does not parse back");
  }
  if (lenient) (void)dm::format_duration(*lenient, dm::DurationStyle::kGo);
  return 0;
}
