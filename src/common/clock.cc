#include "common/clock.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace dm {

TimePoint SystemClock::now() const {
  return std::chrono::steady_clock::now();
}

std::chrono::system_clock::time_point SystemClock::wall_now() const {
  return std::chrono::system_clock::now();
}

bool SystemClock::sleep_for(Duration d, const CancelToken& cancel) const {
  const auto end = now() + d;
  constexpr Duration kSlice = std::chrono::milliseconds(100);
  while (!cancel.cancelled()) {
    const auto t = now();
    if (t >= end) return true;
    std::this_thread::sleep_for(std::min<Duration>(kSlice, end - t));
  }
  return false;
}

std::string format_duration(Duration d) {
  // Under a second: milliseconds, as Go prints a duration ("500ms" rather than "0s").
  if (d > Duration::zero() && d < std::chrono::seconds(1))
    return fmt::format("{}ms", std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  auto total = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (total < 0) total = 0;
  const auto h = total / 3600;
  const auto m = (total % 3600) / 60;
  const auto s = total % 60;
  if (h > 0) return fmt::format("{}h{}m{}s", h, m, s);
  if (m > 0) return fmt::format("{}m{}s", m, s);
  return fmt::format("{}s", s);
}

}  // namespace dm
