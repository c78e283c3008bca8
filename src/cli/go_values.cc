#include "cli/go_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "common/go_bool.h"

namespace dm::cli {
namespace {

std::string quote(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// As in Go, the running values may reach 2^63 (the magnitude of the most negative duration); only a
// positive total is limited to 2^63-1, at the end.
constexpr uint64_t kMax = uint64_t{1} << 63;

// The nanoseconds of a unit ("ns", "us", "µs", "ms", "s", "m", "h"); 0 when unknown.
uint64_t unit_nanoseconds(std::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") return 1000;  // us, U+00B5 s, U+03BC s
  if (unit == "ms") return 1000000;
  if (unit == "s") return 1000000000ULL;
  if (unit == "m") return 60ULL * 1000000000ULL;
  if (unit == "h") return 3600ULL * 1000000000ULL;
  return 0;
}

// One "<number>[.<fraction>]<unit>" of a duration, consumed from the front of `s`: its nanoseconds, or an
// error in Go's words about `orig`.
Result<uint64_t> duration_component(std::string_view& s, std::string_view orig) {
  auto invalid = [&] { return Error("time: invalid duration " + quote(orig)); };
  if (!(s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) return invalid();
  // Integer part.
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > kMax / 10) return invalid();
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    if (v > kMax) return invalid();
  }
  const bool pre = i > 0;
  s.remove_prefix(i);
  // Fraction part.
  uint64_t f = 0;
  double scale = 1;
  bool post = false;
  if (!s.empty() && s[0] == '.') {
    s.remove_prefix(1);
    size_t j = 0;
    bool overflow = false;
    for (; j < s.size() && s[j] >= '0' && s[j] <= '9'; ++j) {
      if (overflow) continue;
      if (f > kMax / 10) {
        overflow = true;  // like Go: further digits are dropped
        continue;
      }
      const uint64_t nf = f * 10 + static_cast<uint64_t>(s[j] - '0');
      if (nf > kMax) {
        overflow = true;
        continue;
      }
      f = nf;
      scale *= 10;
    }
    post = j > 0;
    s.remove_prefix(j);
  }
  if (!pre && !post) return invalid();
  // Unit.
  size_t u = 0;
  for (; u < s.size() && s[u] != '.' && !(s[u] >= '0' && s[u] <= '9'); ++u) {
  }
  if (u == 0) return Error("time: missing unit in duration " + quote(orig));
  const std::string_view unit = s.substr(0, u);
  s.remove_prefix(u);
  const uint64_t mult = unit_nanoseconds(unit);
  if (mult == 0) return Error("time: unknown unit " + quote(unit) + " in duration " + quote(orig));
  if (v > kMax / mult) return invalid();
  v *= mult;
  if (f > 0) {
    v += static_cast<uint64_t>(static_cast<double>(f) * (static_cast<double>(mult) / scale));
    if (v > kMax) return invalid();
  }
  return v;
}

}  // namespace

Result<bool> parse_bool_value(std::string_view s) {
  auto b = parse_go_bool(s);
  if (!b) return Error(fmt::format("strconv.ParseBool: parsing {}: invalid syntax", quote(s)));
  return *b;
}

Result<Duration> parse_go_duration(std::string_view orig) {
  // Mirrors Go's time.ParseDuration, including its error texts.
  auto invalid = [&] { return Error("time: invalid duration " + quote(orig)); };
  std::string_view s = orig;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Duration::zero();
  if (s.empty()) return invalid();
  uint64_t total = 0;
  while (!s.empty()) {
    auto v = duration_component(s, orig);
    if (!v) return v.error();
    if (*v > kMax - total) return invalid();  // (no wrap-around: 2^63 + 2^63 is 0 in 64 bits)
    total += *v;
  }
  if (!neg && total == kMax) return invalid();
  // -2^63 is representable; its magnitude is not.
  const int64_t ns = total == kMax ? std::numeric_limits<int64_t>::min()
                                   : (neg ? -static_cast<int64_t>(total) : static_cast<int64_t>(total));
  return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns));
}

Result<Duration> parse_duration_or_seconds(std::string_view s) {
  // Beyond upstream: "300" or "2.5" means seconds (the variable is called DRAIN_TIMEOUT_SECONDS).
  const auto dot = s.find('.');
  const bool bare = dot == std::string_view::npos
                        ? is_digits(s)
                        : is_digits(s.substr(0, dot)) && is_digits(s.substr(dot + 1));
  if (bare) {
    auto d = parse_go_duration(std::string(s) + "s");
    if (d) return d;
  }
  return parse_go_duration(s);
}

}  // namespace dm::cli
