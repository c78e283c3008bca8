#include "common/clock.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace dm {

// Shared by a token's copies. A derived token holds its parent's state (the chain is read, never changed).
struct CancelToken::State {
  std::atomic<bool> own{false};
  std::atomic<bool>* external = nullptr;
  std::shared_ptr<const State> parent;
  // A deadline of its own, read on `clock` (null: none).
  const Clock* clock = nullptr;
  Deadline deadline;
  std::optional<Sooner> sooner;
  mutable std::mutex cut_mu;
  mutable std::optional<Deadline> cut;  // the deadline once sooner->signal was seen fired

  [[nodiscard]] const std::atomic<bool>& flag() const { return external != nullptr ? *external : own; }
  // Its own deadline, brought forward once `sooner` applies.
  [[nodiscard]] Deadline limit() const {
    if (!sooner) return deadline;
    Duration left{};
    bool tell = false;
    Deadline now_limit;
    {
      const std::lock_guard lock(cut_mu);
      if (!cut && sooner->signal.cancelled()) {
        cut = deadline.earlier(Deadline::after(*clock, sooner->within));
        left = cut->remaining(*clock);
        tell = static_cast<bool>(sooner->on_cut);
      }
      now_limit = cut ? *cut : deadline;
    }
    if (tell) sooner->on_cut(left);
    return now_limit;
  }
};

CancelToken::CancelToken() : state_(std::make_shared<State>()) {}

CancelToken::CancelToken(std::atomic<bool>* external) : state_(std::make_shared<State>()) {
  state_->external = external;
}

CancelToken::CancelToken(std::shared_ptr<State> state) : state_(std::move(state)) {}

void CancelToken::cancel() const {
  (state_->external != nullptr ? *state_->external : state_->own).store(true);
}

bool CancelToken::cancelled() const {
  for (const State* s = state_.get(); s != nullptr; s = s->parent.get()) {
    if (s->flag().load(std::memory_order_relaxed)) return true;
    if (s->clock != nullptr && s->limit().passed(*s->clock)) return true;
  }
  return false;
}

CancelToken CancelToken::child() const {
  auto state = std::make_shared<State>();
  state->parent = state_;
  return CancelToken(std::move(state));
}

CancelToken CancelToken::child_until(const Clock& clock, Deadline deadline) const {
  auto state = std::make_shared<State>();
  state->parent = state_;
  state->clock = &clock;
  state->deadline = deadline;
  return CancelToken(std::move(state));
}

CancelToken CancelToken::child_until(const Clock& clock, Deadline deadline, Sooner sooner) const {
  auto state = std::make_shared<State>();
  state->parent = state_;
  state->clock = &clock;
  state->deadline = deadline;
  state->sooner = std::move(sooner);
  return CancelToken(std::move(state));
}

Deadline CancelToken::deadline() const {
  Deadline soonest;
  for (const State* s = state_.get(); s != nullptr; s = s->parent.get()) {
    if (s->clock != nullptr) soonest = soonest.earlier(s->limit());
  }
  return soonest;
}

TimePoint SystemClock::now() const {
  return std::chrono::steady_clock::now();
}

std::chrono::system_clock::time_point SystemClock::wall_now() const {
  return std::chrono::system_clock::now();
}

bool SystemClock::sleep_for(Duration d, const CancelToken& cancel) const {
  const auto end = now() + std::min(d, cancel.deadline().remaining(*this));
  constexpr Duration kSlice = std::chrono::milliseconds(100);
  while (!cancel.cancelled()) {
    const auto t = now();
    if (t >= end) return true;
    std::this_thread::sleep_for(std::min<Duration>(kSlice, end - t));
  }
  return false;
}

}  // namespace dm
