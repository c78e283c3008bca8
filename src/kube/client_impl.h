// Internals of Client shared by client.cc and watch.cc (not part of the API).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/client.h"
#include "kube/errors.h"
#include "kube/http.h"
#include "kube/outage_log.h"
#include "kube/retry.h"
#include "kube/stopped_by.h"
#include "kube/token_source.h"

namespace dm::kube {

// What a List's items keep: the whole object (less managedFields), or only metadata.uid, .name and
// .namespace.
enum class ListItems { kWhole, kIdentityOnly };

struct Client::Impl {
  Config config;
  ClientOptions options;
  // What stops the request the calling thread sends now: the token of the view it goes through
  // (StoppedBy), else options.cancel.
  [[nodiscard]] CancelToken current_cancel() const {
    const CancelToken* view = StoppedBy::current();
    return view != nullptr ? *view : options.cancel;
  }
  SystemClock system_clock;
  const Clock* clock = nullptr;
  RetryPolicy retry;
  std::unique_ptr<CredentialSource> credentials;
  // One for every connection, watches included (null for http://); replaced, under pool_mu, when an exec
  // plugin hands out another client certificate. Read it with current_tls().
  std::shared_ptr<TlsContext> tls;
  std::string tls_client_cert;  // the exec plugin's certificate that `tls` presents; "" = the Config's
  [[nodiscard]] std::shared_ptr<TlsContext> current_tls() {
    const std::lock_guard lock(pool_mu);
    return tls;
  }
  // The credentials to send now; a client certificate of an exec plugin that `tls` does not present yet
  // replaces it, and the idle connections that present the old one are closed.
  Result<Credentials> current_credentials();

  // Keep-alive connections for ordinary requests. A request borrows an idle one; concurrent requests
  // (parallel evictions) open more, up to kMaxConnections, so they are not serialised behind one another.
  // Watches use connections of their own.
  // Bulk requests (evictions, sent by the dozen) may hold all but kReservedConnections of them, so that the
  // run's own steps (a node patch, the gpu-client re-list) never queue behind a batch of evictions.
  static constexpr size_t kMaxConnections = 8;
  static constexpr size_t kReservedConnections = kMaxConnections - kParallelEvictions;
  std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::vector<std::unique_ptr<HttpConnection>> idle;
  size_t open_connections = 0;
  size_t bulk_in_use = 0;
  Result<std::unique_ptr<HttpConnection>> acquire(bool bulk);
  void release(std::unique_ptr<HttpConnection> c, bool bulk);
  std::atomic<uint64_t> requests{0};
  // What the log says of an outage: every request and watch of the client reports to it.
  OutageLog outage_log;

  std::mutex eviction_mu;
  std::string eviction_group_version;  // "policy/v1" or "policy/v1beta1" once discovered

  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};

  struct Call {
    std::string method = "GET";
    std::string path;  // with query
    std::string body{};
    std::string content_type{};
    On429 on_429 = On429::kRetry;
    // A List: parsed while it arrives, item by item (kube/list_stream), never held whole as text.
    bool list = false;
    ListItems items = ListItems::kWhole;
    // Applied to each item of a List as soon as it is parsed (ListOptions::reduce); may be null.
    const std::function<void(nlohmann::json&)>* reduce = nullptr;
    bool bulk = false;  // one of many alike (evictions): may not take the reserved connections
    // A write that a second attempt cannot repeat by accident (see may_send_again in kube/retry.h).
    bool replay_harmless = false;
    // Where the request remembers meeting the server unreachable (a watch's relist shares the watch's);
    // null: a window of the request's own.
    OutageWindow* outage = nullptr;
    // Retried at most until then (a watch's relist: the watch's deadline), besides the thread's
    // RequestDeadline; both unlimited: for ClientOptions::retry_for.
    Deadline deadline{};
  };

  // Sends `call` with retries (429 when allowed, 5xx, connection errors: for a write only as
  // may_send_again in kube/retry.h allows) until the deadline of what it serves, and returns the parsed 2xx
  // body.
  Result<nlohmann::json> send(const Call& call);
  // After attempt `attempt` of `what` failed with `err` (answered `resp`) and may be sent again: waits
  // before the next attempt (nullopt), or returns the error to end with (the budget spent, or cancelled).
  std::optional<Error> wait_to_retry(const std::string& what, const Error& err, const HttpResponse& resp,
                                     int attempt, RetryBudget& tries, const CancelToken& cancel);
  // Lists every page of `path`; returns the items (with kind/apiVersion filled in) and the list's
  // resourceVersion.
  Result<std::pair<std::vector<nlohmann::json>, std::string>> list_everything(
      const std::string& path, const ListOptions& list_options, ListItems keep = ListItems::kWhole,
      OutageWindow* outage = nullptr, Deadline deadline = {});
  Result<std::string> discover_eviction_version();

  // A uniform random number in [0, 1).
  double random01();
  [[nodiscard]] std::string url(const std::string& path) const { return config.server + path; }
};

// `path` with the query parameters of `options` appended (empty values are left out).
std::string list_path(const std::string& path, const ListOptions& options);
// The same for a watch (watch=1, bookmarks allowed).
std::string watch_path(const std::string& path, const ListOptions& options);

// Parses an API server response without metadata.managedFields (server-side apply bookkeeping, often the
// largest part of an object, never read here: it takes no memory). Objects written back keep theirs on the
// server, which keeps managedFields that a request omits. The callback sees keys, not paths: a label or
// annotation literally named managedFields would be dropped too (no decision reads such a key).
nlohmann::json parse_response(std::string_view text);
// Parses one item of a List the same way, keeping what `items` says.
nlohmann::json parse_list_item(std::string_view text, ListItems items);
// Whether sending this write a second time after a first that went through fails cleanly instead of acting
// twice: a delete or eviction with preconditions, an update or patch that names the resourceVersion it was
// made from (a JSON patch with a test operation), a create of a fixed name; and access reviews, which
// store nothing.
bool replay_harmless(const std::string& method, const nlohmann::json& body);
// One line of a watch response: the event, or nullopt when the line is not a JSON object with a string
// `type`.
std::optional<WatchEvent> decode_watch_event(std::string_view line);
// What the object of an ERROR event says: a Status, or else whatever code, message and reason it carries
// (fields of another type count as absent).
StatusFields watch_error_status(const nlohmann::json& object);
// Appends `key=value` (value percent-encoded) to `path`'s query.
void append_query(std::string& path, const std::string& key, const std::string& value);

}  // namespace dm::kube
