// Test doubles shared by unit tests: a clock that moves only when slept on, and a capture of spdlog output.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "common/clock.h"

namespace dm::test {

// Time moves only when someone sleeps; `on_sleep` lets a test change the world between polls. The wall
// clock starts at `wall_start` (2026-11-30T22:00:00Z unless a test sets it) and moves with it.
class FakeClock final : public Clock {
 public:
  [[nodiscard]] TimePoint now() const override { return now_; }
  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const override {
    return wall_start +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(now_.time_since_epoch());
  }
  bool sleep_for(Duration d, const CancelToken& cancel) const override {
    if (cancel.cancelled()) return false;
    now_ += std::min(d, cancel.deadline().remaining(*this));  // wakes at the token's deadline
    ++sleeps_;
    if (on_sleep) on_sleep(sleeps_);
    return !cancel.cancelled();
  }
  // On the real clock, as the code under test waits for other threads: time moves only by sleeps.
  bool wait_for(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Duration d,
                const std::function<bool()>& ready) const override {
    return cv.wait_for(lk, d, ready);
  }
  void advance(Duration d) { now_ += d; }
  std::function<void(int)> on_sleep;
  std::chrono::system_clock::time_point wall_start{std::chrono::seconds(1796076000)};
  [[nodiscard]] int sleeps() const { return sleeps_; }

 private:
  mutable TimePoint now_{};
  mutable int sleeps_ = 0;
};

// Routes spdlog's default logger into a string ("<level> <message>" lines) for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%l %v");
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  [[nodiscard]] std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace dm::test
