#include "common/duration_text.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

namespace dm {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

std::string go_string(Duration d) {
  const auto ns = duration_cast<nanoseconds>(d).count();
  if (ns == 0) return "0s";
  const bool neg = ns < 0;
  // The magnitude in unsigned arithmetic: -ns overflows for the most negative duration.
  const auto u = neg ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  // The digits of v / 10^prec with the fraction's trailing zeros (and a bare ".") dropped.
  const auto frac = [](uint64_t v, int prec) {
    std::string digits;
    bool print = false;
    for (int i = 0; i < prec; ++i) {
      const auto digit = v % 10;
      print = print || digit != 0;
      if (print) digits.insert(digits.begin(), static_cast<char>('0' + digit));
      v /= 10;
    }
    return std::make_pair(v, digits.empty() ? std::string() : "." + digits);
  };
  std::string out;
  if (u < 1000000000ULL) {
    // Below one second: a single unit (ns, µs or ms) with a fraction.
    int prec = 0;
    std::string unit = "ns";
    if (u >= 1000000ULL) {
      prec = 6;
      unit = "ms";
    } else if (u >= 1000ULL) {
      prec = 3;
      unit = "\u00b5s";
    }
    auto [whole, f] = frac(u, prec);
    out = std::to_string(whole) + f + unit;
  } else {
    auto [secs, f] = frac(u, 9);
    out = std::to_string(secs % 60) + f + "s";
    const uint64_t mins = secs / 60;
    if (mins > 0) {
      out = std::to_string(mins % 60) + "m" + out;
      if (mins / 60 > 0) out = std::to_string(mins / 60) + "h" + out;
    }
  }
  return neg ? "-" + out : out;
}

std::string whole_seconds(Duration d) {
  if (d > Duration::zero() && d < seconds(1))
    return fmt::format("{}ms", duration_cast<milliseconds>(d).count());
  auto total = duration_cast<seconds>(d).count();
  if (total < 0) total = 0;
  const auto h = total / 3600;
  const auto m = (total % 3600) / 60;
  const auto s = total % 60;
  if (h > 0) return fmt::format("{}h{}m{}s", h, m, s);
  if (m > 0) return fmt::format("{}m{}s", m, s);
  return fmt::format("{}s", s);
}

std::string tenths(Duration d) {
  auto t = duration_cast<milliseconds>(d).count() / 100;
  if (t < 0) t = 0;
  if (t < 600) return fmt::format("{}.{}s", t / 10, t % 10);
  const auto minutes = t / 600;
  const auto rest = t % 600;
  return fmt::format("{}m{}.{}s", minutes, rest / 10, rest % 10);
}

std::string rounded_tenths(Duration d) {
  const int64_t ms = duration_cast<milliseconds>(d).count();
  if (ms < 1000) return fmt::format("{}ms", ms);
  const int64_t t = (ms + 50) / 100;
  const int64_t h = t / 36000;
  const int64_t m = (t / 600) % 60;
  const int64_t s = (t / 10) % 60;
  const int64_t frac = t % 10;
  std::string out;
  if (h > 0) out += fmt::format("{}h", h);
  if (h > 0 || m > 0) out += fmt::format("{}m", m);
  out += frac > 0 ? fmt::format("{}.{}s", s, frac) : fmt::format("{}s", s);
  return out;
}

}  // namespace

std::string format_duration(Duration d, DurationStyle style) {
  switch (style) {
    case DurationStyle::kGo:
      return go_string(d);
    case DurationStyle::kWholeSeconds:
      return whole_seconds(d);
    case DurationStyle::kSeconds:
      return std::to_string(duration_cast<seconds>(d).count()) + "s";
    case DurationStyle::kTenths:
      return tenths(d);
    case DurationStyle::kRoundedTenths:
      return rounded_tenths(d);
  }
  return go_string(d);
}

}  // namespace dm
