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

}  // namespace dm
