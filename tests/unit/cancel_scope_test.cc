// The cleanup's time-bounded token: it fires at the restore's deadline, or sooner once SIGTERM arrives.
#include "manager/commands/cancel_scope.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "support/doubles.h"

namespace dm::manager {
namespace {

using namespace std::chrono_literals;

// Polls `pred` every 10 ms for at most 30 s.
bool soon(const std::function<bool()>& pred) {
  for (int i = 0; i < 3000 && !pred(); ++i) std::this_thread::sleep_for(10ms);
  return pred();
}

TEST(CancelAtDeadline, SigtermDuringTheRestoreCutsItsBudgetDownToTheGracePeriods) {
  const SystemClock clock;
  const CancelToken restore;
  const CancelToken sigterm;
  const test::LogCapture log;
  {
    const CancelAtDeadline watchdog(clock, Deadline::after(clock, std::chrono::minutes(10)), restore,
                                    CancelAtDeadline::Sooner{sigterm, 50ms});
    EXPECT_FALSE(restore.cancelled());
    sigterm.cancel();
    EXPECT_TRUE(soon([&] { return restore.cancelled(); })) << "fired within the grace period's budget";
  }
  EXPECT_THAT(log.text(), ::testing::HasSubstr("Received SIGTERM during the restore: ending it within "));
}

TEST(CancelAtDeadline, ARestoreThatEndsBeforeItsDeadlineIsNotCancelled) {
  const SystemClock clock;
  const CancelToken restore;
  const CancelToken sigterm;
  {
    const CancelAtDeadline watchdog(clock, Deadline::after(clock, std::chrono::minutes(10)), restore,
                                    CancelAtDeadline::Sooner{sigterm, 50ms});
  }
  EXPECT_FALSE(restore.cancelled());
}

TEST(CancelAtDeadline, FiresAtItsDeadline) {
  const SystemClock clock;
  const CancelToken restore;
  const CancelAtDeadline watchdog(clock, Deadline::after(clock, 20ms), restore);
  EXPECT_TRUE(soon([&] { return restore.cancelled(); }));
}

}  // namespace
}  // namespace dm::manager
