// A cancellation scope bounded in time: the run's requests stop with SIGTERM, and the cleanup that follows
// gets a token of its own that fires when the cleanup's budget runs out (under SIGTERM the pod's grace
// period; else the restore's own budget, cut down to the grace period if SIGTERM arrives meanwhile).
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/duration_text.h"

namespace dm::manager {

// Fires `token` once `deadline` passes (until destroyed): bounds the retries of the cleanup's requests.
// With `sooner`, also `sooner->within` after `sooner->signal` fires (SIGTERM during a restore), if that
// comes first.
class CancelAtDeadline {
 public:
  struct Sooner {
    CancelToken signal;
    Duration within;
  };
  CancelAtDeadline(const Clock& clock, Deadline deadline, const CancelToken& token,
                   const std::optional<Sooner>& sooner = std::nullopt)
      : thread_([this, &clock, deadline, token, sooner] { watch(clock, deadline, token, sooner); }) {}
  ~CancelAtDeadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  CancelAtDeadline(const CancelAtDeadline&) = delete;
  CancelAtDeadline& operator=(const CancelAtDeadline&) = delete;

 private:
  void watch(const Clock& clock, Deadline deadline, const CancelToken& token,
             const std::optional<Sooner>& sooner) {
    std::unique_lock<std::mutex> lock(mu_);
    bool shortened = false;
    while (!done_ && !deadline.passed(clock)) {
      if (sooner && !shortened && sooner->signal.cancelled()) {
        shortened = true;
        const Deadline cut = Deadline::after(clock, sooner->within);
        if (cut.remaining(clock) < deadline.remaining(clock)) deadline = cut;
        spdlog::warn("Received SIGTERM during the restore: ending it within {}",
                     format_duration(deadline.remaining(clock), DurationStyle::kWholeSeconds));
      }
      cv_.wait_for(lock, std::min<Duration>(deadline.remaining(clock), std::chrono::milliseconds(200)));
    }
    if (!done_) token.cancel();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace dm::manager
