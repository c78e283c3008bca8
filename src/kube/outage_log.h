// What the log says of an API server outage: one line when it begins (what was being done, the error),
// one every kEvery while it lasts (how long so far, the time left until the deadline of the request that
// says it), one when it ends (how long it lasted), however many requests and attempts meet it.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>

#include "common/clock.h"

namespace dm::kube {

class OutageLog {
 public:
  static constexpr std::chrono::seconds kEvery{15};

  // A request found the API server not answering (`error`: no response, a 5xx, a 429; it names the
  // request) and will be tried again for up to `left` (nullopt: a watch without a deadline, for as long as
  // it is needed).
  void unanswered(TimePoint now, std::string_view error, std::optional<Duration> left);
  // The API server answered a request: the outage, if one is under way, has ended.
  void answered(TimePoint now);

 private:
  std::mutex mu_;
  std::optional<TimePoint> since_;  // the outage under way began then
  TimePoint said_at_{};             // when the last line about it was logged
};

}  // namespace dm::kube
