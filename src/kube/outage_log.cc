#include "kube/outage_log.h"

#include <spdlog/spdlog.h>

#include <string>

#include "common/duration_text.h"

namespace dm::kube {

namespace {

std::string until(std::optional<Duration> left) {
  return left ? "trying again for up to " + format_duration(*left, DurationStyle::kWholeSeconds)
              : std::string("trying again");
}

}  // namespace

void OutageLog::unanswered(TimePoint now, std::string_view error, std::optional<Duration> left,
                           Unanswered why) {
  const std::lock_guard lock(mu_);
  const bool overload = why == Unanswered::kTooManyRequests;
  last_why_ = why;
  if (!since_) {
    since_ = now;
    said_at_ = now;
    spdlog::warn("{}: {}; {}",
                 overload ? "The API server is overloaded and turning requests away"
                          : "The API server is not answering",
                 error, until(left));
    return;
  }
  if (now - said_at_ < kEvery) return;
  said_at_ = now;
  spdlog::warn("The API server has {} for {}: {}; {}", overload ? "turned requests away" : "not answered",
               format_duration(now - *since_, DurationStyle::kWholeSeconds), error, until(left));
}

void OutageLog::answered(TimePoint now) {
  const std::lock_guard lock(mu_);
  if (!since_) return;
  spdlog::info("The API server is {} again after {}",
               last_why_ == Unanswered::kTooManyRequests ? "taking requests" : "answering",
               format_duration(now - *since_, DurationStyle::kWholeSeconds));
  since_.reset();
  ended_ = now;
}

std::optional<TimePoint> OutageLog::last_ended() const {
  const std::lock_guard lock(mu_);
  return ended_;
}

}  // namespace dm::kube
