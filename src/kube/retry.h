// When and how long to wait before retrying an API request (exponential backoff with jitter, Retry-After),
// and until when: the deadline of what the request serves (RequestDeadline).
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace dm::kube {

struct RetryPolicy {
  std::chrono::milliseconds base{200};
  std::chrono::milliseconds max{10000};
};

// The deadline of what the requests made on this thread serve (a step's, the lease's, the cleanup's), for as
// long as the object lives: a request the API server does not answer (no response, 5xx, 429) is tried again
// until then. Scopes nest; the innermost one counts, and an unlimited one means "no deadline of its own":
// the client's default budget (ClientOptions::retry_for) applies. Threads start without one, so a step that
// hands its requests to threads of its own opens a scope in each.
class RequestDeadline {
 public:
  explicit RequestDeadline(Deadline deadline);
  ~RequestDeadline();
  RequestDeadline(const RequestDeadline&) = delete;
  RequestDeadline& operator=(const RequestDeadline&) = delete;
  // This thread's innermost scope's deadline (unlimited without one).
  static Deadline current();

 private:
  Deadline previous_;
};

// How long one request may still be tried. With a deadline of its own (the earliest of `deadlines` that is
// set): until then, whatever the failures. Without one: for `otherwise` of time not answered (no response,
// 5xx), and for as long as it takes while the server turns it away (429: an overloaded server that did not
// look at it; giving up would only bring the request back with the run's restart, adding to that load).
class RetryBudget {
 public:
  RetryBudget(const Clock& clock, std::initializer_list<Deadline> deadlines, Duration otherwise);
  // Counts the time since `since` (an attempt, or the wait after one) as spent on a failure of this kind.
  void spent(TimePoint since, bool turned_away);
  // Whether a request turned away now may be tried again without a limit.
  [[nodiscard]] bool unlimited(bool turned_away) const {
    return turned_away && !own_deadline_ && budget_ > Duration::zero();
  }
  // The time left of the counted budget (zero or less: give up).
  [[nodiscard]] Duration left() const;
  // A budget of zero: one attempt, its error returned as it is.
  [[nodiscard]] bool single_attempt() const { return budget_ == Duration::zero(); }
  [[nodiscard]] Duration tried_for() const { return clock_.now() - started_; }

 private:
  const Clock& clock_;
  TimePoint started_;
  bool own_deadline_ = false;
  Duration budget_{0};
  Duration turned_away_{0};  // not counted (without a deadline of its own)
};

// An HttpRequest's keep_going for a request that `cancel` stops. A read stops the moment the token fires.
// A write already under way is let finish for up to `settle`: its answer tells whether it was applied,
// where an abort would leave the caller unsure of a change the server may still apply after the caller's
// next look (a signal on a write).
std::function<bool()> keep_going_until(const CancelToken& cancel, bool write,
                                       std::chrono::milliseconds settle);

// The error of a request given up at the deadline of what it served: `err`, saying for how long it went
// unanswered, marked unanswered.
Error gave_up(Error err, Duration tried_for);

// What a 429 Too Many Requests is to the caller: worth another attempt, or the answer to return (an
// eviction that a PodDisruptionBudget blocks: the caller decides whether and when to try again).
enum class On429 { kRetry, kReturn };

// True for failures worth retrying: no response (status 0), 429 when kRetry, and 5xx.
bool retryable_status(long http_status, On429 on_429 = On429::kRetry);

// What is known of a failed attempt besides its status.
struct Attempt {
  bool request_sent = true;      // a byte of the request was written
  bool replay_harmless = false;  // see below
  On429 on_429 = On429::kRetry;
};

// Whether a request that failed with `http_status` (0: no response, a transport error) may be sent again.
// A read (GET, HEAD) always may. A write may not happen twice by accident, so it is sent again only when
//  * the server said it did not happen: 429 (turned away before it was looked at, when kRetry);
//  * it never left: a transport error before any byte of the request was written (`request_sent` false);
//  * or a replay is harmless by construction (`replay_harmless`): a precondition (the object's
//    resourceVersion or UID, a fixed name for a create) makes the second attempt fail cleanly if the first
//    went through, or the write changes nothing that lasts (an access review). Then a transport error
//    after sending and a 5xx answer are retried too.
bool may_send_again(std::string_view method, long http_status, const Attempt& attempt);

// An API server that has just come back answers 403 Forbidden until its authorizer has loaded the RBAC
// rules. One request's (or one watch's) memory of meeting the server unreachable: a 403 within kAfter of
// that is the restart and is retried like the outage itself. A request that never met the outage takes a
// 403 as the answer, whatever other requests of the client met (a missing permission is found at once).
class OutageWindow {
 public:
  static constexpr std::chrono::seconds kAfter{30};
  void unreachable(TimePoint now) { last_ = now; }
  [[nodiscard]] bool forbidden_is_restart(TimePoint now) const { return last_ && now - *last_ < kAfter; }

 private:
  std::optional<TimePoint> last_;
};

// Retry-After in seconds (the API server never sends an HTTP-date); nullopt when absent or unparsable.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value);

// The wait before retry number `attempt` (0 for the first retry): base * 2^attempt capped at max, then
// scaled into [50%, 100%] by `jitter` in [0, 1) so that clients do not retry in lockstep. A Retry-After
// from the server (a 429 of API Priority and Fairness) wins, between base and max.
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt, double jitter,
                                        std::optional<std::chrono::milliseconds> retry_after = std::nullopt);

}  // namespace dm::kube
