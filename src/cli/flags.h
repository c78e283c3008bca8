// The global options of driver-manager: one table (flag, environment variable, type, where the value
// goes), applied with urfave/cli's rules by parse_options and listed by help_text.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/options.h"
#include "common/result.h"

namespace dm::cli {

enum class Kind { kString, kBool, kDuration };

// One global option: its flag, its environment variable, its type and where it goes in the result. Built
// with designated initializers, naming each field given; the setters not of its kind stay empty.
// Applied in table order, like urfave/cli applies its flags (the first bad environment value wins).
struct Flag {
  std::string name;  // without "--"
  std::string env;   // "" = no environment variable
  Kind kind = Kind::kString;
  std::string usage;
  // The value held in a result, as help shows it: help shows a default-constructed result's, so every
  // default is written once, where ParseResult / manager::Settings declare it.
  std::function<std::string(const ParseResult& r)> shown{};
  // Stores a string value (kString) or the parsed value (converted by the caller) into `out`.
  std::function<Status(ParseResult& out, const std::string& value)> set_string{};
  std::function<void(ParseResult& out, bool value)> set_bool{};
  std::function<void(ParseResult& out, Duration value)> set_duration{};
  bool bare_seconds = false;  // duration also accepts a bare number of seconds (beyond upstream)
};

// The global options, in the order they are applied (upstream's first, in upstream's order).
const std::vector<Flag>& global_flags();

// Parses a value of `f` and stores it; `source` names where it came from, for the error.
Status apply_flag(const Flag& f, ParseResult& out, const std::string& value, const std::string& source);

// "\"s\"".
std::string quote(std::string_view s);

}  // namespace dm::cli
