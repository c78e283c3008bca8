// How long pods arriving late on the cordoned, tainted node are evicted before the run gives up: 30 s after
// the first of them, and never within 90 s of the end of an API server outage the run met (the scheduler's
// and the controllers' caches relist at the back-off their watches reached while the server was away).
#include <gtest/gtest.h>

#include "manager/pods/late_arrivals.h"

namespace dm::manager {
namespace {

using namespace std::chrono_literals;

const TimePoint kFirst{std::chrono::hours(1)};

TEST(LateArrivalPatience, WithoutAnOutageThePodsOf30sEndTheRun) {
  EXPECT_FALSE(late_arrivals_exhausted(kFirst + 29s, kFirst, std::nullopt));
  EXPECT_TRUE(late_arrivals_exhausted(kFirst + 30s, kFirst, std::nullopt));
}

TEST(LateArrivalPatience, AfterAnOutageThePatienceRunsUntil90sAfterTheServerCameBack) {
  const TimePoint back = kFirst - 10s;  // the server answered again 10 s before the first late pod
  EXPECT_FALSE(late_arrivals_exhausted(kFirst + 30s, kFirst, back)) << "caches may still lag";
  EXPECT_FALSE(late_arrivals_exhausted(back + 89s, kFirst, back));
  EXPECT_TRUE(late_arrivals_exhausted(back + 90s, kFirst, back));
  EXPECT_TRUE(late_arrivals_after_outage(back + 89s, back));
  EXPECT_FALSE(late_arrivals_after_outage(back + 90s, back));
}

TEST(LateArrivalPatience, AnOutageLongBeforeChangesNothing) {
  const TimePoint back = kFirst - 10min;
  EXPECT_TRUE(late_arrivals_exhausted(kFirst + 30s, kFirst, back));
  EXPECT_FALSE(late_arrivals_after_outage(kFirst, back));
}

}  // namespace
}  // namespace dm::manager
