// A cancellation scope bounded in time: the run's requests stop with SIGTERM, and the cleanup that follows
// gets a token of its own that fires when the cleanup's budget (the pod's grace period) runs out.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace dm::manager {

// Fires `token` once `deadline` passes (until destroyed): bounds the retries of the cleanup's requests.
class CancelAtDeadline {
 public:
  CancelAtDeadline(const Clock& clock, Deadline deadline, const CancelToken& token)
      : thread_([this, &clock, deadline, token] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_ && !deadline.passed(clock)) {
            cv_.wait_for(lock, std::min<Duration>(deadline.remaining(clock), std::chrono::milliseconds(200)));
          }
          if (!done_) token.cancel();
        }) {}
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
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace dm::manager
