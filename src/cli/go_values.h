// Values with Go's syntax and Go's error texts, as urfave/cli reads flags and environment variables:
// time.ParseDuration and strconv.ParseBool (time.Duration.String() is common/duration_text's kGo).
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace dm::cli {

// Go time.ParseDuration ("300s", "5m", "1h30m", "1.5h", "-2s", "0"); errors are Go's text
// (`time: missing unit in duration "300"`, `time: invalid duration "x"`).
Result<Duration> parse_go_duration(std::string_view s);
// parse_go_duration, or a bare (non-negative) number of seconds ("300", "2.5") - beyond upstream.
Result<Duration> parse_duration_or_seconds(std::string_view s);
// Go strconv.ParseBool with Go's error text (`strconv.ParseBool: parsing "x": invalid syntax`).
Result<bool> parse_bool_value(std::string_view s);

}  // namespace dm::cli
