// The clock the in-memory tier runs on (tests/support/quiescent_clock.h): time moves only when every thread
// sleeps, to the soonest wake-up, and never past a thread that still has work to do.
#include "support/quiescent_clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace dm::test {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TEST(QuiescentClock, ALongSleepEndsAtItsWakeUpExactly) {
  const QuiescentClock clock;
  const auto start = clock.now();
  const auto wall = clock.wall_now();
  EXPECT_TRUE(clock.sleep_for(minutes(30), CancelToken()));
  EXPECT_EQ(clock.now() - start, minutes(30));
  EXPECT_EQ(clock.wall_now() - wall, minutes(30));
  EXPECT_GE(clock.moves(), 1);
}

TEST(QuiescentClock, SleepersWakeInTheOrderOfTheirWakeUps) {
  const QuiescentClock clock;
  const auto start = clock.now();
  std::mutex mu;
  std::vector<std::pair<int, Duration>> woke;  // sleeper, when
  auto sleeper = [&](int id, Duration d) {
    return std::thread([&, id, d] {
      clock.sleep_for(d, CancelToken());
      const std::lock_guard lk(mu);
      woke.emplace_back(id, clock.now() - start);
    });
  };
  auto late = sleeper(1, seconds(50));
  auto early = sleeper(2, seconds(3));
  auto middle = sleeper(3, seconds(20));
  late.join();
  early.join();
  middle.join();
  const std::vector<std::pair<int, Duration>> want = {{2, seconds(3)}, {3, seconds(20)}, {1, seconds(50)}};
  EXPECT_EQ(woke, want);
}

TEST(QuiescentClock, TimeStandsStillWhileAThreadHasWorkToDo) {
  const QuiescentClock clock;
  const auto start = clock.now();
  std::atomic<bool> stop_working{false};
  std::atomic<bool> slept{false};
  std::thread worker([&] {
    while (!stop_working) {
    }  // running all along: never asleep
  });
  std::thread sleeper([&] {
    clock.sleep_for(seconds(10), CancelToken());
    slept = true;
  });
  // Half a second of real time in which the sleeper's 10 s would have passed many times over.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(slept.load()) << "time moved while the worker ran";
  EXPECT_EQ(clock.now(), start);
  stop_working = true;
  worker.join();
  sleeper.join();
  EXPECT_TRUE(slept.load());
  EXPECT_EQ(clock.now() - start, seconds(10));
}

TEST(QuiescentClock, AWaitOnAConditionEndsWhenItHoldsAndOtherwiseAtItsTime) {
  const QuiescentClock clock;
  const auto start = clock.now();
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::thread setter([&] {
    clock.sleep_for(seconds(2), CancelToken());
    const std::lock_guard lk(mu);
    ready = true;
    cv.notify_all();
  });
  {
    std::unique_lock lk(mu);
    EXPECT_TRUE(clock.wait_for(lk, cv, seconds(10), [&] { return ready; }));
  }
  setter.join();
  EXPECT_EQ(clock.now() - start, seconds(2)) << "woken by the condition, not by its time";

  std::unique_lock lk(mu);
  EXPECT_FALSE(clock.wait_for(lk, cv, seconds(7), [] { return false; }));
  EXPECT_EQ(clock.now() - start, seconds(9));
}

TEST(QuiescentClock, ACancelledSleepReturnsFalseAndATokensDeadlineEndsIt) {
  const QuiescentClock clock;
  const auto start = clock.now();
  const CancelToken cancel;
  std::atomic<bool> sleep_ended{false};
  std::thread canceller([&] {  // runs all along (time stands still), fires the token, runs on until woken
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
    cancel.cancel();
    while (!sleep_ended) {
    }
  });
  EXPECT_FALSE(clock.sleep_for(std::chrono::hours(1), cancel));
  sleep_ended = true;
  canceller.join();
  EXPECT_EQ(clock.now(), start) << "woken by the token, not by time";

  const CancelToken parent;
  const auto bounded = parent.child_until(clock, Deadline::after(clock, seconds(5)));
  const auto before = clock.now();
  EXPECT_FALSE(clock.sleep_for(minutes(10), bounded));
  EXPECT_EQ(clock.now() - before, seconds(5));
}

}  // namespace
}  // namespace dm::test
