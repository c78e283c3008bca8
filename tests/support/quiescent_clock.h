// A clock for tests whose code runs on several threads (the flow's lease renewer, pod watch and eviction
// workers, node-sim's kubelet loop): time stands still while any thread of the process has work to do, and
// when every thread is asleep it moves straight to the soonest moment one of them waits for. A 30 s wait
// takes as long as the work done in it, not 30 s; what happens in it happens in the same order as on the real
// clock, since nothing is woken before its time.
//
// "Asleep" is what the kernel says of each thread (/proc/self/task/<tid>/stat: S, sleeping), read twice a
// millisecond apart: a thread that runs, or is ready to run, holds time still. Waits on the real clock (a
// test's polling, a condition variable with a timeout of its own) count as asleep too, but time never moves
// to their wake-up, only to those of the waits made on this clock (sleep_for, wait_for).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace dm::test {

class QuiescentClock final : public Clock {
 public:
  QuiescentClock();
  ~QuiescentClock() override;
  QuiescentClock(const QuiescentClock&) = delete;
  QuiescentClock& operator=(const QuiescentClock&) = delete;

  [[nodiscard]] TimePoint now() const override;
  // Starts at the real wall-clock time of the clock's creation and moves with now().
  [[nodiscard]] std::chrono::system_clock::time_point wall_now() const override;
  bool sleep_for(Duration d, const CancelToken& cancel) const override;

  bool wait_for(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Duration d,
                const std::function<bool()>& ready) const override;

  // How many times time has moved (a test of the clock reads it).
  [[nodiscard]] int moves() const { return moves_.load(); }

 private:
  struct Waiter {
    TimePoint wake;
    std::condition_variable* cv;  // woken when time reaches `wake`
  };
  std::list<Waiter>::iterator enter(TimePoint wake, std::condition_variable* cv) const;
  void leave(std::list<Waiter>::iterator it) const;
  void advance_loop();

  std::chrono::system_clock::time_point wall_start_;
  std::atomic<TimePoint::rep> now_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable moved_;
  mutable std::list<Waiter> waiters_;
  std::atomic<int> moves_{0};
  std::atomic<bool> stop_{false};
  std::thread advancer_;
};

}  // namespace dm::test
