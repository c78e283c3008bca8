// Where cancellation comes from: a token with a deadline of its own (no thread watches the time), the
// cleanup's token that SIGTERM only shortens, and the API view that decides which token stops a request.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "common/clock.h"
#include "kube/stopped_by.h"
#include "manager/commands/cleanup.h"
#include "support/doubles.h"
#include "support/memory_cluster.h"

namespace dm {
namespace {

using namespace std::chrono_literals;

TEST(CancelToken, ADeadlineOfItsOwnFiresOnItsClock) {
  test::FakeClock clock;
  const CancelToken run;
  const CancelToken bounded = run.child_until(clock, Deadline::after(clock, 10s));
  clock.advance(9s);
  EXPECT_FALSE(bounded.cancelled());
  clock.advance(1s);
  EXPECT_TRUE(bounded.cancelled());
  EXPECT_FALSE(run.cancelled());  // the parent keeps going
}

TEST(CancelToken, ADeadlineTokenStillFiresWithItsParent) {
  test::FakeClock clock;
  std::atomic<bool> sigterm{false};
  const CancelToken parent(&sigterm);
  const CancelToken bounded = parent.child_until(clock, Deadline::after(clock, 10min));
  sigterm = true;
  EXPECT_TRUE(bounded.cancelled());
}

TEST(CancelToken, ASleepWakesAtTheTokensDeadline) {
  test::FakeClock clock;
  const CancelToken bounded = CancelToken().child_until(clock, Deadline::after(clock, 3s));
  const TimePoint start = clock.now();
  EXPECT_FALSE(clock.sleep_for(1h, bounded));
  EXPECT_EQ(clock.now() - start, 3s);
  EXPECT_TRUE(clock.sleep_for(0s, CancelToken()));  // no deadline: a plain sleep
}

TEST(CancelToken, TheSoonestDeadlineOfTheChainIsItsDeadline) {
  test::FakeClock clock;
  const CancelToken outer = CancelToken().child_until(clock, Deadline::after(clock, 5s));
  const CancelToken inner = outer.child_until(clock, Deadline::after(clock, 1min));
  EXPECT_EQ(inner.deadline().remaining(clock), 5s);
  EXPECT_TRUE(CancelToken().deadline().unlimited());
}

TEST(CancelToken, ASignalBringsTheDeadlineForwardFromWhenItIsSeen) {
  test::FakeClock clock;
  const CancelToken sigterm;
  int told = 0;
  Duration left{};
  const CancelToken restore = CancelToken().child_until(
      clock, Deadline::after(clock, 10min), {.signal = sigterm, .within = 25s, .on_cut = [&](Duration d) {
                                               ++told;
                                               left = d;
                                             }});
  clock.advance(1min);
  EXPECT_EQ(restore.deadline().remaining(clock), 9min);
  sigterm.cancel();
  EXPECT_FALSE(restore.cancelled());  // seen now: 25 s from here
  EXPECT_EQ(told, 1);
  EXPECT_EQ(left, 25s);
  clock.advance(24s);
  EXPECT_FALSE(restore.cancelled());
  clock.advance(1s);
  EXPECT_TRUE(restore.cancelled());
  EXPECT_EQ(told, 1);
}

TEST(CancelToken, ASignalNeverPutsTheDeadlineOff) {
  test::FakeClock clock;
  const CancelToken sigterm;
  const CancelToken restore =
      CancelToken().child_until(clock, Deadline::after(clock, 10s), {.signal = sigterm, .within = 25s});
  sigterm.cancel();
  EXPECT_EQ(restore.deadline().remaining(clock), 10s);
}

TEST(CleanupToken, SigtermDuringTheRestoreCutsItsBudgetDownToTheGracePeriods) {
  test::FakeClock clock;
  test::LogCapture log;
  const CancelToken sigterm;
  const CancelToken cleanup = manager::cleanup_token(clock, Deadline::after(clock, 10min), sigterm,
                                                     /*terminated=*/false, 25s);
  EXPECT_FALSE(cleanup.cancelled());
  sigterm.cancel();
  EXPECT_FALSE(cleanup.cancelled());  // SIGTERM does not stop the restore...
  EXPECT_THAT(log.text(), ::testing::HasSubstr("Received SIGTERM during the restore: ending it within 25s"));
  EXPECT_FALSE(clock.sleep_for(1h, cleanup));  // ...it ends it within the grace period
  EXPECT_EQ(cleanup.deadline().remaining(clock), Duration::zero());
}

TEST(CleanupToken, UnderSigtermItFiresAtItsDeadlineOnly) {
  test::FakeClock clock;
  test::LogCapture log;
  std::atomic<bool> fired{true};
  const CancelToken sigterm(&fired);
  const CancelToken cleanup = manager::cleanup_token(clock, Deadline::after(clock, 25s), sigterm,
                                                     /*terminated=*/true, 25s);
  EXPECT_FALSE(cleanup.cancelled());
  clock.advance(25s);
  EXPECT_TRUE(cleanup.cancelled());
  EXPECT_THAT(log.text(), ::testing::Not(::testing::HasSubstr("during the restore")));
}

// What stops a request is the view it was sent through, not a token swapped on the connection.
TEST(StoppedBy, EachRequestObeysTheTokenOfItsView) {
  test::MemoryCluster cluster;
  cluster.apply(test::memory_node("n1"));
  const CancelToken sigterm;
  const CancelToken cleanup;
  kube::StoppedBy run_requests(cluster, sigterm);
  kube::StoppedBy cleanup_requests(cluster, cleanup);
  sigterm.cancel();
  auto stopped = run_requests.get(kube::paths::node("n1"));
  ASSERT_FALSE(stopped);
  EXPECT_TRUE(stopped.error().cancelled());
  EXPECT_TRUE(cleanup_requests.get(kube::paths::node("n1")));
  EXPECT_TRUE(cluster.get(kube::paths::node("n1")));  // the connection itself has no token
  // A view of a view replaces its token.
  kube::StoppedBy again(run_requests, cleanup);
  EXPECT_TRUE(again.get(kube::paths::node("n1")));
}

}  // namespace
}  // namespace dm
