#include <gtest/gtest.h>

#include <chrono>

#include "manager/pods/pod_watch.h"

namespace dm::manager {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(FormatDuration, WholeSecondsMinutesAndHoursAsGoPrintsThem) {
  EXPECT_EQ(format_duration(seconds(5)), "5s");
  EXPECT_EQ(format_duration(minutes(5)), "5m0s");
  EXPECT_EQ(format_duration(hours(1) + minutes(2) + seconds(3)), "1h2m3s");
}

TEST(FormatDuration, UnderASecondIsMillisecondsNotZeroSeconds) {
  EXPECT_EQ(format_duration(milliseconds(500)), "500ms");
  EXPECT_EQ(format_duration(milliseconds(1)), "1ms");
}

TEST(FormatDuration, ZeroAndNegativeAreZeroSeconds) {
  EXPECT_EQ(format_duration(Duration::zero()), "0s");
  EXPECT_EQ(format_duration(-seconds(3)), "0s");
}

}  // namespace
}  // namespace dm::manager
