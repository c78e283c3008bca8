// Durations as text: one function, one named style per way a duration is shown (flags and help, logs, the
// run's summary, estimates), so that each place keeps its format and no place keeps a formatter of its own.
#pragma once

#include <string>

#include "common/clock.h"

namespace dm {

enum class DurationStyle {
  // Go's time.Duration.String(), to the nanosecond: "0s", "1.5s", "5m0s", "1h0m0s", "250ms", "1.5µs",
  // "-2s". Flag defaults in help, so that they read as the Go program shows them.
  kGo,
  // Whole seconds as Go prints them, truncated: "5s", "5m0s", "1h2m3s"; under a second (but more than
  // none) milliseconds, "500ms", rather than "0s"; a negative duration is "0s". Waits, timeouts and
  // retries in log lines and the plan.
  kWholeSeconds,
  // Plain seconds, truncated, never minutes: "0s", "125s". The MOFED wait.
  kSeconds,
  // Truncated to a tenth of a second, minutes at most: "0.0s", "1.2s", "59.9s", "2m5.0s"; a negative
  // duration is "0.0s". The phase durations of the summary line.
  kTenths,
  // Under a second milliseconds, "750ms"; otherwise rounded to a tenth of a second, without a ".0":
  // "30.8s", "2m18s", "1h0m5s". Estimates of how long a run or a wave takes.
  kRoundedTenths,
};

std::string format_duration(Duration d, DurationStyle style);

}  // namespace dm
