#include "common/duration_text.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

namespace dm {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

std::string go(Duration d) {
  return format_duration(d, DurationStyle::kGo);
}
std::string whole(Duration d) {
  return format_duration(d, DurationStyle::kWholeSeconds);
}

TEST(DurationText, GoAsTimeDurationStringPrintsIt) {
  EXPECT_EQ(go(Duration::zero()), "0s");
  EXPECT_EQ(go(minutes(5)), "5m0s");
  EXPECT_EQ(go(seconds(60)), "1m0s");
  EXPECT_EQ(go(seconds(90)), "1m30s");
  EXPECT_EQ(go(hours(1)), "1h0m0s");
  EXPECT_EQ(go(hours(1) + minutes(2) + milliseconds(3500)), "1h2m3.5s");
  EXPECT_EQ(go(milliseconds(1500)), "1.5s");
  EXPECT_EQ(go(milliseconds(250)), "250ms");
  EXPECT_EQ(go(microseconds(1500)), "1.5ms");
  EXPECT_EQ(go(microseconds(2)), "2\u00b5s");
  EXPECT_EQ(go(nanoseconds(7)), "7ns");
  EXPECT_EQ(go(-seconds(2)), "-2s");
  EXPECT_EQ(go(nanoseconds(std::numeric_limits<int64_t>::min())), "-2562047h47m16.854775808s");
}

TEST(DurationText, WholeSecondsMinutesAndHoursAsGoPrintsThem) {
  EXPECT_EQ(whole(seconds(5)), "5s");
  EXPECT_EQ(whole(minutes(5)), "5m0s");
  EXPECT_EQ(whole(hours(1) + minutes(2) + seconds(3)), "1h2m3s");
  EXPECT_EQ(whole(seconds(61) + milliseconds(900)), "1m1s");  // truncated, not rounded
}

TEST(DurationText, WholeSecondsUnderASecondIsMillisecondsNotZeroSeconds) {
  EXPECT_EQ(whole(milliseconds(500)), "500ms");
  EXPECT_EQ(whole(milliseconds(1)), "1ms");
}

TEST(DurationText, WholeSecondsOfZeroAndNegativeAreZeroSeconds) {
  EXPECT_EQ(whole(Duration::zero()), "0s");
  EXPECT_EQ(whole(-seconds(3)), "0s");
}

TEST(DurationText, SecondsNeverBecomeMinutes) {
  EXPECT_EQ(format_duration(Duration::zero(), DurationStyle::kSeconds), "0s");
  EXPECT_EQ(format_duration(milliseconds(1999), DurationStyle::kSeconds), "1s");
  EXPECT_EQ(format_duration(seconds(125), DurationStyle::kSeconds), "125s");
}

TEST(DurationText, TenthsTruncatedWithMinutesAtMost) {
  EXPECT_EQ(format_duration(milliseconds(0), DurationStyle::kTenths), "0.0s");
  EXPECT_EQ(format_duration(milliseconds(1249), DurationStyle::kTenths), "1.2s");
  EXPECT_EQ(format_duration(seconds(59) + milliseconds(990), DurationStyle::kTenths), "59.9s");
  EXPECT_EQ(format_duration(seconds(125), DurationStyle::kTenths), "2m5.0s");
  EXPECT_EQ(format_duration(hours(2), DurationStyle::kTenths), "120m0.0s");
  EXPECT_EQ(format_duration(-seconds(1), DurationStyle::kTenths), "0.0s");
}

TEST(DurationText, RoundedTenthsDropAZeroTenth) {
  EXPECT_EQ(format_duration(milliseconds(750), DurationStyle::kRoundedTenths), "750ms");
  EXPECT_EQ(format_duration(milliseconds(30750), DurationStyle::kRoundedTenths), "30.8s");
  EXPECT_EQ(format_duration(seconds(138), DurationStyle::kRoundedTenths), "2m18s");
  EXPECT_EQ(format_duration(seconds(3600 + 5), DurationStyle::kRoundedTenths), "1h0m5s");
}

}  // namespace
}  // namespace dm
