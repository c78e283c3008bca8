// Time and sleeping go through one Clock so tests can shorten waits; every sleep can be cancelled
// (SIGTERM) through a CancelToken, and a token can carry a deadline of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace dm {

using Duration = std::chrono::steady_clock::duration;
using TimePoint = std::chrono::steady_clock::time_point;

class CancelToken;

class Clock {
 public:
  virtual ~Clock() = default;
  // Steady time: what every wait, deadline and duration is measured in.
  [[nodiscard]] virtual TimePoint now() const = 0;
  // Wall-clock time: only for timestamps that others read (the state annotation, a lease, an Event).
  [[nodiscard]] virtual std::chrono::system_clock::time_point wall_now() const = 0;
  // Sleeps for d, waking early if `cancel` fires, and at the latest at `cancel`'s deadline (when it has
  // one). Returns false if cancelled.
  virtual bool sleep_for(Duration d, const CancelToken& cancel) const = 0;
  // Waits on `cv` (its mutex held in `lk`) until `ready()` holds or `d` has passed on this clock; another
  // thread ends the wait early by changing what `ready` reads and notifying `cv`. Returns ready().
  virtual bool wait_for(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Duration d,
                        const std::function<bool()>& ready) const = 0;
};

// The real clocks; sleeps in slices of at most 100 ms so cancellation is noticed quickly.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] TimePoint now() const override;
  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const override;
  bool sleep_for(Duration d, const CancelToken& cancel) const override;
  bool wait_for(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Duration d,
                const std::function<bool()>& ready) const override {
    return cv.wait_for(lk, d, ready);
  }
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
  // The sooner of the two (a limit is sooner than none).
  [[nodiscard]] Deadline earlier(const Deadline& other) const {
    if (!set_) return other;
    if (!other.set_) return *this;
    return at_ <= other.at_ ? *this : other;
  }

 private:
  explicit Deadline(TimePoint at) : at_(at), set_(true) {}
  TimePoint at_{};
  bool set_ = false;
};

// A flag set once (e.g. by the SIGTERM handler) and read by every wait loop and request. Copies share it.
// A token derived from another fires with it; it may also fire on its own (child()) or at a deadline of its
// own (child_until()): a scope bounded in time needs no thread to watch the time, the token answers from
// the clock whenever it is asked.
class CancelToken {
 public:
  CancelToken();
  // Wraps an existing flag (e.g. a static one written from a signal handler).
  explicit CancelToken(std::atomic<bool>* external);

  void cancel() const;
  // Cancelled itself, or a token it derives from, or a deadline of theirs has passed on its clock.
  [[nodiscard]] bool cancelled() const;
  // A token that fires with this one (SIGTERM) and can also be fired on its own, without firing this one:
  // stops one of two steps running side by side when the other fails.
  [[nodiscard]] CancelToken child() const;

  struct Sooner;  // below
  // A child that also fires once `deadline` passes on `clock` (which must outlive it), or sooner by
  // `sooner`. A sleep on `clock` with it wakes at that deadline.
  [[nodiscard]] CancelToken child_until(const Clock& clock, Deadline deadline) const;
  [[nodiscard]] CancelToken child_until(const Clock& clock, Deadline deadline, Sooner sooner) const;
  // The soonest deadline of this token and the tokens it derives from (unlimited: none).
  [[nodiscard]] Deadline deadline() const;

 private:
  struct State;
  explicit CancelToken(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// How a token's deadline is brought forward when another token fires: to `within` after `signal` fires,
// counted from the first look at the token (cancelled(), deadline(), a sleep on it) that finds `signal`
// fired; `on_cut`, if set, is told once then, with the time that is left.
struct CancelToken::Sooner {
  CancelToken signal;
  Duration within{};
  std::function<void(Duration left)> on_cut{};
};

}  // namespace dm
