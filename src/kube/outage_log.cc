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

void OutageLog::unanswered(TimePoint now, std::string_view error, std::optional<Duration> left) {
  const std::lock_guard lock(mu_);
  if (!since_) {
    since_ = now;
    said_at_ = now;
    spdlog::warn("The API server is not answering: {}; {}", error, until(left));
    return;
  }
  if (now - said_at_ < kEvery) return;
  said_at_ = now;
  spdlog::warn("The API server has not answered for {}: {}; {}",
               format_duration(now - *since_, DurationStyle::kWholeSeconds), error, until(left));
}

void OutageLog::answered(TimePoint now) {
  const std::lock_guard lock(mu_);
  if (!since_) return;
  spdlog::info("The API server is answering again after {}",
               format_duration(now - *since_, DurationStyle::kWholeSeconds));
  since_.reset();
}

}  // namespace dm::kube
