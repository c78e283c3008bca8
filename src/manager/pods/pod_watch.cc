#include "manager/pods/pod_watch.h"

#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <utility>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

constexpr auto kSlice = std::chrono::milliseconds(200);
constexpr size_t kMaxListed = 10;
// How long the pod watch gets to show the pods a fresh LIST found (it is normally milliseconds behind).
constexpr auto kWatchCatchUp = std::chrono::seconds(10);
// While polling, how often the watch is tried again, and how long it must last to count as back.
constexpr auto kWatchRetryEvery = std::chrono::seconds(30);
constexpr auto kWatchSettles = std::chrono::seconds(2);

// A pod moved into the cache, never to be changed there (snapshots share it).
std::shared_ptr<const Json> cached_pod(Json&& pod) {
  return std::make_shared<const Json>(std::move(pod));
}

}  // namespace

PodWatch::PodWatch(kube::Api& client, const Clock& clock, std::string node)
    : requests_token_(kube::stop_token_of(client).child()),
      client_(client, requests_token_),
      clock_(clock),
      node_(std::move(node)) {}

PodWatch::~PodWatch() {
  stop();
}

void PodWatch::stop() {
  stop_ = true;
  stop_token_.cancel();
  requests_token_.cancel();
  if (thread_.joinable()) thread_.join();
}

void PodWatch::begin() {
  if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { run(); });
}

Status PodWatch::start(Deadline deadline, const CancelToken& cancel) {
  begin();
  std::unique_lock lk(mu_);
  while (!synced_) {
    if (last_error_status_ == 401 || last_error_status_ == 403) {
      return Error("cannot list the pods of node " + node_ + ": " + last_error_, last_error_status_);
    }
    if (cancel.cancelled()) return Error("cancelled while listing the pods of node " + node_);
    if (deadline.passed(clock_)) {
      return Error("timed out listing the pods of node " + node_ +
                   (last_error_.empty() ? "" : ": " + last_error_));
    }
    clock_.wait_for(lk, changed_, std::min<Duration>(kSlice, deadline.remaining(clock_)),
                    [&] { return synced_ || last_error_status_ == 401 || last_error_status_ == 403; });
  }
  return ok_status();
}

void PodWatch::replace_all(std::vector<Json>& items) {
  std::map<std::string, std::shared_ptr<const Json>> fresh;
  for (auto& p : items) {
    auto uid = kube::uid(p);
    fresh[std::move(uid)] = cached_pod(std::move(p));
  }
  std::lock_guard lk(mu_);
  for (const auto& [uid, pod] : by_uid_) {
    if (fresh.count(uid) == 0) left_.insert(uid);
  }
  by_uid_.swap(fresh);
  synced_ = true;
  last_error_.clear();
  last_error_status_ = 0;
  ++generation_;
  changed_.notify_all();
}

void PodWatch::apply(kube::WatchEvent& ev) {
  const auto uid = kube::uid(ev.object);
  if (uid.empty()) return;
  const bool stored = ev.type == "ADDED" || ev.type == "MODIFIED";
  if (!stored && ev.type != "DELETED") return;
  auto pod = stored ? cached_pod(std::move(ev.object)) : nullptr;
  std::lock_guard lk(mu_);
  if (stored) {
    by_uid_[uid] = std::move(pod);
  } else {
    by_uid_.erase(uid);
    left_.insert(uid);
  }
  ++generation_;
  changed_.notify_all();
}

// A failed list or watch is not fatal: the waits keep their deadlines and name this error if they expire.
void PodWatch::record_failure(const Error& error, bool polling, TimePoint& next_warning) {
  {
    std::lock_guard lk(mu_);
    last_error_ = error.message;
    last_error_status_ = error.http_status;
    ++generation_;
    changed_.notify_all();
  }
  const auto now = clock_.now();
  if (now >= next_warning) {
    spdlog::warn("{} the pods of node {} failed, retrying every second: {}", polling ? "Listing" : "Watching",
                 node_, error.message);
    next_warning = now + std::chrono::seconds(10);
  } else {
    spdlog::debug("{} the pods of node {} failed again: {}", polling ? "Listing" : "Watching", node_,
                  error.message);
  }
}

bool PodWatch::listed() const {
  std::lock_guard lk(mu_);
  return synced_;
}

// Each list replaces the cache, each event changes it. `retried_at`: when the watch was tried again after a
// refusal (reset by run() when it is refused again): it is said to be back once it lasted kWatchSettles.
kube::WatchHandlers PodWatch::watch_handlers(std::optional<TimePoint>& retried_at) {
  kube::WatchHandlers h;
  h.on_sync = [this, &retried_at](std::vector<Json>& items) {
    replace_all(items);
    if (retried_at) retried_at = clock_.now();  // the watch request goes out now
  };
  h.on_event = [this](kube::WatchEvent& ev) { apply(ev); };
  h.done = [this, &retried_at] {
    if (retried_at && clock_.now() - *retried_at >= kWatchSettles) {
      spdlog::info(
          "Watching the pods of node {} again: the watch is allowed now (no more listing every second)",
          node_);
      retried_at.reset();
    }
    return stop_.load();
  };
  h.tick = std::chrono::duration_cast<std::chrono::milliseconds>(kSlice);
  return h;
}

// The GPU Operator's stock driver role may list pods but not watch them: once the list worked and the
// watch was refused, the cache is refreshed by a list every second instead, and the watch is tried again
// every 30 s (a role fixed meanwhile, or a refusal by an API server still loading its RBAC rules after a
// restart) (docs/behaviour.md, The pod watch). Nothing else changes; waits see changes up to a second later.
void PodWatch::run() {
  kube::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node_;
  // Every pod of the node stays in memory for the whole run: only with what the rules read.
  opts.reduce = kube::drop_unread_pod_fields;
  std::optional<TimePoint> retried_at;  // the watch, tried again, is back once it lasted kWatchSettles
  const kube::WatchHandlers h = watch_handlers(retried_at);

  bool polling = false;
  TimePoint try_watch_at{};
  TimePoint next_warning{};
  while (!stop_) {
    Status s = ok_status();
    if (polling && clock_.now() >= try_watch_at) {
      polling = false;
      retried_at = clock_.now();
      spdlog::debug("Trying to watch the pods of node {} again", node_);
    }
    if (polling) {
      auto items = client_.list_all(kube::paths::pods(), opts);
      if (items) {
        replace_all(*items);
        clock_.sleep_for(std::chrono::seconds(1), stop_token_);
        continue;
      }
      s = items.error();
    } else {
      s = client_.list_watch(kube::paths::pods(), opts, h);
      if (stop_ || s) break;
      if (listed() && s.error().http_status == 403) {
        if (!retried_at) {
          spdlog::info(
              "This service account may list but not watch the pods of node {}: listing them every second "
              "instead, and trying the watch again every {}",
              node_, format_duration(kWatchRetryEvery, DurationStyle::kWholeSeconds));
        }
        spdlog::debug("The watch was refused: {}", s.error().message);
        retried_at.reset();
        polling = true;
        try_watch_at = clock_.now() + kWatchRetryEvery;
        continue;
      }
      retried_at.reset();  // failed otherwise: the usual retry below, with a watch
    }
    if (stop_) break;
    if (s.error().cancelled()) {
      // SIGTERM stopped the run's requests; the cleanup's requests (and this watch) go on with a token of
      // their own, not a failure worth a warning.
      spdlog::debug("{} the pods of node {} was cancelled", polling ? "Listing" : "Watching", node_);
      clock_.sleep_for(std::chrono::milliseconds(200), stop_token_);
      continue;
    }
    record_failure(s.error(), polling, next_warning);
    clock_.sleep_for(std::chrono::seconds(1), stop_token_);
  }
}

PodList PodWatch::pods() const {
  std::lock_guard lk(mu_);
  PodList out;
  out.reserve(by_uid_.size());
  for (const auto& [uid, p] : by_uid_) out.push_back(*p);
  return out;
}

PodSnapshot PodWatch::snapshot() const {
  std::lock_guard lk(mu_);
  PodSnapshot out;
  out.reserve(by_uid_.size());
  for (const auto& [uid, p] : by_uid_) out.push_back(p);
  return out;
}

bool PodWatch::has_uid(const std::string& uid) const {
  std::lock_guard lk(mu_);
  return by_uid_.count(uid) > 0;
}

bool PodWatch::saw_leave(const std::string& uid) const {
  std::lock_guard lk(mu_);
  return left_.count(uid) > 0;
}

Status PodWatch::wait_until(const std::string& what, const WaitCheck& check, Deadline deadline,
                            const CancelToken& cancel, Duration log_every) const {
  const auto start = clock_.now();
  WaitProgress progress(clock_, what, deadline, log_every, &observer_);
  while (true) {
    std::vector<std::string> remaining;
    bool synced = false;
    PodSnapshot snapshot;
    std::string watch_error;
    uint64_t seen = 0;  // the cache's generation this look is based on
    {
      std::lock_guard lk(mu_);
      seen = generation_;
      synced = synced_;
      watch_error = last_error_;
      if (synced) {
        snapshot.reserve(by_uid_.size());
        for (const auto& [uid, p] : by_uid_) snapshot.push_back(p);
      }
    }
    if (synced) {
      // The check runs outside the lock: it may consult other state (eviction workers) with its own locks.
      auto r = check(snapshot);
      if (!r) return r.error();
      if (r->empty()) return ok_status();
      remaining = std::move(*r);
    } else {
      remaining.push_back("the pod list of node " + node_ + " (not loaded yet" +
                          (watch_error.empty() ? "" : ": " + watch_error) + ")");
    }
    const auto now = clock_.now();
    if (cancel.cancelled()) return Error("cancelled while waiting for " + what);
    if (deadline.passed(clock_)) {
      return Error(fmt::format("timed out after {} waiting for {}; still present: {}",
                               format_duration(now - start, DurationStyle::kWholeSeconds), what,
                               join_names(remaining, kMaxListed)));
    }
    progress.update(remaining);
    // Woken by any change since the look above, including one that came while the check ran.
    std::unique_lock lk(mu_);
    clock_.wait_for(lk, changed_, std::min<Duration>(kSlice, deadline.remaining(clock_)),
                    [&] { return generation_ != seen; });
  }
}

Result<PodSnapshot> list_pods_fresh(kube::Api& client, const PodWatch& watch, const Clock& clock,
                                    const std::string& node, const std::string& not_older_than,
                                    const CancelToken& cancel) {
  kube::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node;
  opts.resource_version = not_older_than;
  auto listed = client.list_identities(kube::paths::pods(), opts);
  if (!listed && !opts.resource_version.empty() && !cancel.cancelled()) {
    spdlog::debug(
        "Listing the pods of node {} as of resourceVersion {} failed ({}); listing them as they are now",
        node, opts.resource_version, listed.error().message);
    opts.resource_version.clear();
    listed = client.list_identities(kube::paths::pods(), opts);
  }
  if (!listed) return listed.error().wrap("failed to list the pods of node " + node);

  PodSnapshot found;
  const WaitCheck caught_up = [&](const PodSnapshot& cached) -> Result<std::vector<std::string>> {
    std::map<std::string, const std::shared_ptr<const Json>*> have;
    for (const auto& p : cached) have.emplace(kube::uid(*p), &p);
    std::vector<std::string> missing;
    PodSnapshot pods;
    for (const auto& p : *listed) {
      const auto it = have.find(kube::uid(p));
      if (it != have.end()) {
        pods.push_back(*it->second);
      } else if (!watch.saw_leave(kube::uid(p))) {  // a pod the watch saw go needs nothing more
        missing.push_back(kube::ref_string(p));
      }
    }
    if (missing.empty()) found = std::move(pods);
    return missing;
  };
  if (watch.wait_until("the pod watch to show the listed pods", caught_up,
                       Deadline::after(clock, kWatchCatchUp), cancel)) {
    return found;
  }
  if (cancel.cancelled()) return Error("terminated by SIGTERM");
  // A pod the watch never showed may have come and gone between two looks at the cache: ask the API.
  std::map<std::string, std::shared_ptr<const Json>> cached;
  for (auto& p : watch.snapshot()) cached.emplace(kube::uid(*p), std::move(p));
  PodSnapshot out;
  for (const auto& p : *listed) {
    if (const auto it = cached.find(kube::uid(p)); it != cached.end()) {
      out.push_back(it->second);
      continue;
    }
    auto g =
        client.get(kube::paths::pod(p["metadata"].value("namespace", ""), p["metadata"].value("name", "")));
    if (!g && g.error().not_found()) continue;
    if (g && kube::uid(*g) != kube::uid(p)) continue;
    return Error("the watch of the pods of node " + node + " does not show pod " + kube::ref_string(p) +
                 " that a LIST returned; retry the run");
  }
  return out;
}

}  // namespace dm::manager
