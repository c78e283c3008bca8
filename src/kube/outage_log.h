// What the log says of an API server outage: one line when it begins (what was being done, the error),
// one every kEvery while it lasts (how long so far, the time left until the deadline of the request that
// says it), one when it ends (how long it lasted), however many requests and attempts meet it. A server
// that answers 429 Too Many Requests is not down but overloaded (API Priority and Fairness turning requests
// away): its lines say so, so that nobody looks for a dead API server.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>

#include "common/clock.h"

namespace dm::kube {

// Why a request went unanswered: no response or a 5xx, or turned away with 429 Too Many Requests.
enum class Unanswered { kNoAnswer, kTooManyRequests };

class OutageLog {
 public:
  static constexpr std::chrono::seconds kEvery{15};

  // A request found the API server not answering (`error`: no response, a 5xx, a 429; it names the
  // request) and will be tried again for up to `left` (nullopt: a watch without a deadline, for as long as
  // it is needed).
  void unanswered(TimePoint now, std::string_view error, std::optional<Duration> left,
                  Unanswered why = Unanswered::kNoAnswer);
  // The API server answered a request: the outage, if one is under way, has ended.
  void answered(TimePoint now);
  // When the last outage ended (nullopt: none has, or none was met).
  [[nodiscard]] std::optional<TimePoint> last_ended() const;

 private:
  mutable std::mutex mu_;
  std::optional<TimePoint> since_;               // the outage under way began then
  std::optional<TimePoint> ended_;               // the last one ended then
  TimePoint said_at_{};                          // when the last line about it was logged
  Unanswered last_why_ = Unanswered::kNoAnswer;  // what the last unanswered attempt met
};

}  // namespace dm::kube
