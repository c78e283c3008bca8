#include "manager/pods/eviction.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "kube/retry.h"
#include "kube/stopped_by.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

enum class State { kEvicting, kBlocked, kAccepted, kGone, kFailed };

struct PodProgress {
  State state = State::kEvicting;
  std::string message;              // last refusal / failure
  std::vector<StatusCause> causes;  // of the last refusal (e.g. DisruptionBudget)
};

// Shared between the per-pod workers and the waiting thread.
struct Shared {
  std::mutex mu;
  std::vector<PodProgress> pods;
};

bool transient(const Error& e) {
  return e.http_status == 0 || e.http_status >= 500;
}

// An eviction in a namespace being deleted is refused (403) until the pod is gone: wait, as kubectl drain
// does.
bool namespace_terminating(const Error& e) {
  return e.forbidden() && e.has_cause("NamespaceTerminating");
}

void set_state(Shared& shared, size_t i, State s, std::string message = {},
               std::vector<StatusCause> causes = {}) {
  std::lock_guard lk(shared.mu);
  shared.pods[i].state = s;
  shared.pods[i].message = std::move(message);
  shared.pods[i].causes = std::move(causes);
}

// One eviction request for target `index`; the time of its next attempt, or nullopt when it is settled
// (accepted, gone or failed).
std::optional<TimePoint> attempt_eviction(kube::Api& client, const PodWatch& watch, const Clock& clock,
                                          const EvictionTarget& t, size_t index, Shared& shared,
                                          TimePoint& next_blocked_log, const EvictionOptions& options) {
  if (!watch.has_uid(t.uid)) {
    set_state(shared, index, State::kGone);
    return std::nullopt;
  }
  kube::DeleteOptions del;
  del.uid = t.uid;  // never evict a same-name replacement
  del.grace_period_seconds = options.grace_period_seconds;
  auto s = client.evict(t.ns, t.name, del);
  if (s) {
    set_state(shared, index, State::kAccepted);
    return std::nullopt;
  }
  const Error& e = s.error();
  if (e.not_found() || e.conflict()) {  // gone, or the UID precondition failed: the original is gone
    set_state(shared, index, State::kGone);
    return std::nullopt;
  }
  if (e.too_many_requests() || namespace_terminating(e) || transient(e)) {
    set_state(shared, index, State::kBlocked, e.message, e.causes);
    const auto now = clock.now();
    if (now >= next_blocked_log) {
      // Upstream's (kubectl drain's) wording, with the real retry interval.
      spdlog::warn("error when evicting pods/\"{}\" -n \"{}\" (will retry after {}): {}", t.name, t.ns,
                   format_duration(options.retry_interval, DurationStyle::kWholeSeconds), e.message);
      next_blocked_log = now + options.blocked_log_interval;
    }
    return now + options.retry_interval;
  }
  set_state(shared, index, State::kFailed, e.wrap("failed to evict pod " + t.ns + "/" + t.name).message);
  return std::nullopt;
}

// A worker evicts its share of the targets: every due one in turn, then sleeps until the next refusal's
// retry is due. The client sends only so many evictions at once; more workers would only queue for a
// connection, each with a thread stack of its own.
constexpr size_t kEvictionWorkers = kube::Api::kParallelEvictions;

void eviction_worker(kube::Api& client, const PodWatch& watch, const Clock& clock,
                     const std::vector<EvictionTarget>& targets, const std::vector<size_t>& mine,
                     Shared& shared, const CancelToken& stop, const EvictionOptions& options) {
  struct Pending {
    size_t index;
    TimePoint due;
    TimePoint next_blocked_log;
  };
  std::vector<Pending> pending;
  pending.reserve(mine.size());
  for (size_t i : mine) pending.push_back({i, TimePoint{}, TimePoint{}});
  while (!pending.empty() && !stop.cancelled()) {
    TimePoint next_due = TimePoint::max();
    for (auto it = pending.begin(); it != pending.end() && !stop.cancelled();) {
      if (clock.now() < it->due) {
        next_due = std::min(next_due, it->due);
        ++it;
        continue;
      }
      const EvictionTarget& t = targets[it->index];
      if (it->due == TimePoint{}) spdlog::info("evicting pod {}/{}", t.ns, t.name);
      auto retry =
          attempt_eviction(client, watch, clock, t, it->index, shared, it->next_blocked_log, options);
      if (!retry) {
        it = pending.erase(it);
        continue;
      }
      it->due = *retry;
      next_due = std::min(next_due, it->due);
      ++it;
    }
    if (pending.empty()) break;
    const auto now = clock.now();
    if (next_due > now) clock.sleep_for(next_due - now, stop);
  }
}

// The targets still on the node, each with how far its eviction got; an error when one failed for good.
Result<std::vector<std::string>> still_present(const PodSnapshot& pods,
                                               const std::vector<EvictionTarget>& targets, Shared& shared) {
  // Views into the snapshot's pods, which outlive the check: no copy per pod on each cache change.
  std::unordered_set<std::string_view> present;
  present.reserve(pods.size());
  for (const auto& p : pods) {
    if (const std::string* u = kube::find_string(*p, {"metadata", "uid"})) present.insert(*u);
  }
  std::vector<std::string> remaining;
  std::lock_guard lk(shared.mu);
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto& pr = shared.pods[i];
    if (pr.state == State::kFailed) return Error(pr.message);
    if (present.count(targets[i].uid) == 0) continue;
    std::string line = targets[i].ns + "/" + targets[i].name;
    switch (pr.state) {
      case State::kBlocked:
        line += " (eviction refused: " + pr.message + ")";
        break;
      case State::kAccepted:
        line += " (terminating)";
        break;
      default:
        line += " (evicting)";
        break;
    }
    remaining.push_back(std::move(line));
  }
  return remaining;
}

}  // namespace

EvictionTarget eviction_target(const Json& pod) {
  const auto& md = pod.at("metadata");
  return {md.value("namespace", ""), md.value("name", ""), md.value("uid", ""), true,
          kube::pod_grace_period_seconds(pod)};
}

std::vector<EvictionTarget> targets_of(const PodListDecision& decision) {
  std::vector<EvictionTarget> out;
  out.reserve(decision.to_evict.size() + decision.to_wait.size());
  for (const auto& p : decision.to_evict) out.push_back(eviction_target(p));
  for (const auto& p : decision.to_wait) {
    out.push_back(eviction_target(p));
    out.back().evict = false;
  }
  return out;
}

std::vector<size_t> eviction_order(const std::vector<EvictionTarget>& targets,
                                   std::optional<int64_t> grace_override) {
  std::vector<size_t> order;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].evict) order.push_back(i);
  }
  if (!grace_override) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return targets[a].grace_seconds > targets[b].grace_seconds; });
  }
  return order;
}

Status evict_pods(kube::Api& client, const PodWatch& watch, const Clock& clock,
                  const std::vector<EvictionTarget>& targets, Deadline deadline, const CancelToken& cancel,
                  const EvictionOptions& options) {
  if (targets.empty()) return ok_status();
  auto shared = std::make_shared<Shared>();
  shared->pods.resize(targets.size());
  // Stops the workers and their requests in flight once the wait below ends (and with SIGTERM).
  const CancelToken stop = kube::stop_token_of(client).child();
  kube::StoppedBy workers_client(client, stop);
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i].evict) {
      spdlog::info("Waiting for terminating pod {}/{} to be gone", targets[i].ns, targets[i].name);
      set_state(*shared, i, State::kAccepted);
    }
  }
  const std::vector<size_t> to_evict = eviction_order(targets, options.grace_period_seconds);
  // The targets each worker evicts, dealt out in turn so that the first requests go out at once.
  std::vector<std::vector<size_t>> shares(std::min(to_evict.size(), kEvictionWorkers));
  for (size_t j = 0; j < to_evict.size(); ++j) shares[j % shares.size()].push_back(to_evict[j]);
  std::vector<std::thread> workers;
  workers.reserve(shares.size());
  for (const auto& share : shares) {
    workers.emplace_back([&] {
      // An eviction the API server does not answer is tried again until the deadline of the evictions.
      const kube::RequestDeadline scope(deadline);
      eviction_worker(workers_client, watch, clock, targets, share, *shared, stop, options);
    });
  }

  const WaitCheck check = [&](const PodSnapshot& pods) { return still_present(pods, targets, *shared); };
  auto s = watch.wait_until(options.what + " to be evicted", check, deadline, cancel);
  stop.cancel();
  for (auto& w : workers) w.join();
  if (!s) {
    // The causes of the refusals still in force travel with the error, so that callers can tell e.g. a
    // PodDisruptionBudget from a slow pod without reading the message.
    Error e = s.error();
    for (const auto& pr : shared->pods) {
      if (pr.state == State::kBlocked) e.causes.insert(e.causes.end(), pr.causes.begin(), pr.causes.end());
    }
    return e;
  }
  spdlog::info("All {} are gone", options.what);
  return ok_status();
}

}  // namespace dm::manager
