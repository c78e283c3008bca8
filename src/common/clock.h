// Time and sleeping go through one Clock so tests can shorten waits; every sleep can be cancelled
// (SIGTERM) through a CancelToken.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace dm {

using Duration = std::chrono::steady_clock::duration;
using TimePoint = std::chrono::steady_clock::time_point;

// A flag set once (e.g. by the SIGTERM handler) and read by every wait loop.
class CancelToken {
 public:
  CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  // Wraps an existing flag (e.g. a static one written from a signal handler).
  explicit CancelToken(std::atomic<bool>* external) : external_(external) {}

  void cancel() const { flag()->store(true); }
  [[nodiscard]] bool cancelled() const {
    return flag()->load(std::memory_order_relaxed) || (parent_ && parent_->cancelled());
  }
  // A token that fires with this one (SIGTERM) and can also be fired on its own, without firing this one:
  // stops one of two steps running side by side when the other fails.
  [[nodiscard]] CancelToken child() const {
    CancelToken c;
    c.parent_ = std::make_shared<const CancelToken>(*this);
    return c;
  }

 private:
  [[nodiscard]] std::atomic<bool>* flag() const { return external_ != nullptr ? external_ : flag_.get(); }
  std::shared_ptr<std::atomic<bool>> flag_;
  std::atomic<bool>* external_ = nullptr;
  std::shared_ptr<const CancelToken> parent_;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Steady time: what every wait, deadline and duration is measured in.
  [[nodiscard]] virtual TimePoint now() const = 0;
  // Wall-clock time: only for timestamps that others read (the state annotation, a lease, an Event).
  [[nodiscard]] virtual std::chrono::system_clock::time_point wall_now() const = 0;
  // Sleeps for d, waking early if `cancel` fires. Returns false if cancelled.
  virtual bool sleep_for(Duration d, const CancelToken& cancel) const = 0;
};

// The real clocks; sleeps in slices of at most 100 ms so cancellation is noticed quickly.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] TimePoint now() const override;
  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const override;
  bool sleep_for(Duration d, const CancelToken& cancel) const override;
};

// An absolute point in time, or none (no limit).
class Deadline {
 public:
  Deadline() = default;  // no limit
  static Deadline after(const Clock& clock, Duration d) { return Deadline(clock.now() + d); }
  static Deadline none() { return {}; }
  [[nodiscard]] bool unlimited() const { return !set_; }
  [[nodiscard]] bool passed(const Clock& clock) const { return set_ && clock.now() >= at_; }
  // Time left (zero when passed; Duration::max() when unlimited).
  [[nodiscard]] Duration remaining(const Clock& clock) const {
    if (!set_) return Duration::max();
    auto now = clock.now();
    return now >= at_ ? Duration::zero() : at_ - now;
  }

 private:
  explicit Deadline(TimePoint at) : at_(at), set_(true) {}
  TimePoint at_{};
  bool set_ = false;
};

}  // namespace dm
