// One list+watch of the pods on this node (all namespaces) kept in a local cache keyed by UID, and the one
// wait helper every wait of the flow uses: "until this predicate over the cache holds, or the deadline".
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "kube/stopped_by.h"
#include "manager/pods/wait_progress.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

using PodList = std::vector<nlohmann::json>;

// What a wait still waits for (one human-readable entry per pod or condition; empty = done), or an error
// that ends the wait at once.
using WaitCheck = std::function<Result<std::vector<std::string>>(const PodSnapshot& pods)>;

// The watch's requests go through a view of `client` of its own: they stop with `client`'s token (SIGTERM,
// when `client` is a view) and with stop(), whatever retry budget they are in.
class PodWatch {
 public:
  PodWatch(kube::Api& client, const Clock& clock, std::string node);
  ~PodWatch();  // stop()
  PodWatch(const PodWatch&) = delete;
  PodWatch& operator=(const PodWatch&) = delete;

  // Starts the watch thread (its first list goes out at once) without waiting. Idempotent.
  void begin();
  // Starts the watch thread if begin() did not, and waits for the first full list. A failing list is retried
  // until `deadline` (the error then names the last API error), except 401/403, which no retry fixes.
  Status start(Deadline deadline, const CancelToken& cancel);

  // The pods currently on the node (copy of the cache).
  [[nodiscard]] PodList pods() const;
  // The same, shared with the cache (no pod is copied).
  [[nodiscard]] PodSnapshot snapshot() const;
  // Whether a pod with this UID is still on the node.
  [[nodiscard]] bool has_uid(const std::string& uid) const;
  // Whether the watch saw a pod with this UID leave the node (deleted, or gone from a re-list of the
  // cache): a LIST that still returned it was answered before the cache's latest news.
  [[nodiscard]] bool saw_leave(const std::string& uid) const;

  // Waits until `check` returns an empty list, evaluating it on every change of the cache (and at least
  // every 200 ms). Logs the progress line (wait_progress_line()) every `log_every` and tells the wait
  // observer, if one is set.
  // Errors: the deadline passed (naming what remained), `cancel` fired, or `check` returned an error.
  Status wait_until(const std::string& what, const WaitCheck& check, Deadline deadline,
                    const CancelToken& cancel, Duration log_every = std::chrono::seconds(5)) const;

  // Told at the start of every wait and at each of its progress lines (the run's state annotation).
  void set_wait_observer(WaitObserver observer) { observer_ = std::move(observer); }

  // Ends the watch: its request in flight (a list or a watch, retrying or not) is cancelled and the thread
  // joined, without waiting for an answer. The cache stays as it was (snapshot() still reads it); nothing
  // refreshes it any more. Idempotent.
  void stop();

 private:
  void run();
  void apply(kube::WatchEvent& ev);  // one watch event into the cache
  void record_failure(const Error& error, bool polling, TimePoint& next_warning);
  kube::WatchHandlers watch_handlers(std::optional<TimePoint>& retried_at);
  [[nodiscard]] bool listed() const;  // the first list is in the cache
  // Replaces the cache with a full list of the node's pods (moved from).
  void replace_all(std::vector<nlohmann::json>& items);

  CancelToken stop_token_;      // fired by stop(): the pauses between attempts end (SIGTERM does not)
  CancelToken requests_token_;  // fired by stop(): a child of the caller's token (SIGTERM)
  kube::StoppedBy client_;      // the watch's requests, stopped by requests_token_
  const Clock& clock_;
  std::string node_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<const nlohmann::json>> by_uid_;
  std::set<std::string> left_;  // UIDs of the pods that left the cache
  bool synced_ = false;
  std::string last_error_;
  int last_error_status_ = 0;
  uint64_t generation_ = 0;
  WaitObserver observer_;

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A fresh look at the pods on `node`: a LIST from the API server (no older than `not_older_than`, a
// resourceVersion; empty: as they are now), whose pods are then taken from `watch` once it has shown every
// listed one (or seen it go). Identities only travel in the LIST; the pods themselves are the watch
// cache's. A pod the watch never shows within 10 s is looked up by GET; one that exists is an error.
Result<PodSnapshot> list_pods_fresh(kube::Api& client, const PodWatch& watch, const Clock& clock,
                                    const std::string& node, const std::string& not_older_than,
                                    const CancelToken& cancel);

}  // namespace dm::manager
