#include "kube/retry.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

#include "common/duration_text.h"

namespace dm::kube {

bool retryable_status(long http_status, On429 on_429) {
  if (http_status == 0) return true;
  if (http_status == 429) return on_429 == On429::kRetry;
  // 501 Not Implemented will not change on a retry.
  return http_status >= 500 && http_status != 501;
}

bool may_send_again(std::string_view method, long http_status, const Attempt& attempt) {
  if (!retryable_status(http_status, attempt.on_429)) return false;
  if (method == "GET" || method == "HEAD" || attempt.replay_harmless) return true;
  if (http_status == 429) return true;
  return http_status == 0 && !attempt.request_sent;
}

namespace {
thread_local Deadline this_threads_deadline;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
}  // namespace

RequestDeadline::RequestDeadline(Deadline deadline) : previous_(this_threads_deadline) {
  this_threads_deadline = deadline;
}

RequestDeadline::~RequestDeadline() {
  this_threads_deadline = previous_;
}

Deadline RequestDeadline::current() {
  return this_threads_deadline;
}

RetryBudget::RetryBudget(const Clock& clock, std::initializer_list<Deadline> deadlines, Duration otherwise)
    : clock_(clock), started_(clock.now()) {
  std::optional<Duration> earliest;
  for (const Deadline& d : deadlines) {
    if (d.unlimited()) continue;
    const Duration left = d.remaining(clock);
    if (!earliest || left < *earliest) earliest = left;
  }
  own_deadline_ = earliest.has_value();
  budget_ = earliest.value_or(otherwise);
}

void RetryBudget::spent(TimePoint since, bool turned_away) {
  if (unlimited(turned_away)) turned_away_ += clock_.now() - since;
}

Duration RetryBudget::left() const {
  return budget_ - (clock_.now() - started_ - turned_away_);
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\r' || value.back() == '\n')) {
    value.remove_suffix(1);
  }
  if (value.empty()) return std::nullopt;
  int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc() || end != value.data() + value.size() || seconds < 0) return std::nullopt;
  return std::chrono::milliseconds(seconds * 1000);
}

std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt, double jitter,
                                        std::optional<std::chrono::milliseconds> retry_after) {
  const std::chrono::milliseconds cap = std::max(policy.max, std::chrono::milliseconds(0));
  // Never at once: a Retry-After of 0 (a proxy's) would have every attempt follow the last without a pause.
  if (retry_after) return std::clamp(*retry_after, std::min(policy.base, cap), cap);
  int64_t d = std::max<int64_t>(policy.base.count(), 1);
  for (int i = 0; i < attempt && d < cap.count(); ++i) d *= 2;
  d = std::min<int64_t>(d, cap.count());
  jitter = std::clamp(jitter, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(d) * (0.5 + jitter / 2)));
}

std::function<bool()> keep_going_until(const CancelToken& cancel, bool write,
                                       std::chrono::milliseconds settle) {
  return [cancel, write, settle,
          cancel_seen = std::optional<std::chrono::steady_clock::time_point>()]() mutable {
    if (!cancel.cancelled()) return true;
    if (!write) return false;
    const auto now = std::chrono::steady_clock::now();
    if (!cancel_seen) cancel_seen = now;
    return now - *cancel_seen < settle;
  };
}

Error gave_up(Error err, Duration tried_for) {
  err.message += " (not answered for " + format_duration(tried_for, DurationStyle::kWholeSeconds) +
                 ": gave up at the deadline)";
  err.unanswered = true;
  return err;
}

}  // namespace dm::kube
