// Logging: every layer logs through spdlog's default logger; setup_logging() gives it upstream's
// logrus format ("time=<RFC3339> level=<info|warning|error|fatal> msg=<text>", to stderr) or JSON.
// Fatal is spdlog's "critical" level.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dm {

enum class LogFormat { kText, kJson };

// Parses "text" / "json"; anything else is an error naming the value.
Result<LogFormat> parse_log_format(std::string_view s);
// Parses a level like logrus does (case-insensitive: panic, fatal, error, warn, warning, info, debug, trace)
// and returns its canonical name ("warn" is "warning"); anything else is an error naming the value.
// "panic" shows fatal lines too: this program logs a fatal line where a Go program would panic.
Result<std::string> parse_log_level(std::string_view s);

// Installs the stderr logger with the given format and level (as parse_log_level takes it; an invalid one
// means "info"). Idempotent.
void setup_logging(LogFormat format, std::string_view level = "info");

// The message of the last fatal line logged through the logger of setup_logging() ("" when none): the
// reason a failed run gives last, which main() leaves as the container's termination message.
std::string last_fatal_message();

// Formats one record the way setup_logging() writes it (exposed for tests).
// "2026-11-30T22:01:02Z": the one RFC 3339 form (UTC, whole seconds) of log lines, Events and annotations.
std::string rfc3339(std::chrono::system_clock::time_point tp);

std::string format_log_line(LogFormat format, std::string_view level, std::string_view time_rfc3339,
                            std::string_view msg);

}  // namespace dm
