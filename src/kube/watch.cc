// Client::list_watch: list, then stream changes, resuming from the last resourceVersion and re-listing when
// the server no longer has the history (410 Gone). Three steps, one per function of ListWatch: relist(),
// stream() (one watch request), and retry_or_relist() (what to do after a stream that failed).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "common/duration_text.h"
#include "kube/client.h"
#include "kube/client_impl.h"
#include "kube/errors.h"
#include "kube/watch_stream.h"

namespace dm::kube {

using Json = nlohmann::json;
namespace {

bool is_2xx(long status) {
  return status >= 200 && status < 300;
}

// Why one watch request ended.
enum class StreamEnd {
  kClosed,        // the server ended the stream (timeoutSeconds) or the connection dropped
  kDone,          // handlers.done() returned true
  kStopped,       // cancelled or past the deadline
  kGone,          // 410: the resourceVersion is too old, re-list
  kErrorEvent,    // an ERROR event other than 410
  kBadData,       // a line that is not a watch event
  kUnauthorized,  // 401 and the token file holds a newer token: watch again with it
};

// What one watch request came to: how it ended, and the error when it failed.
struct StreamResult {
  StreamEnd end = StreamEnd::kClosed;
  std::optional<Error> error;  // set when the stream failed (not for kClosed, kDone, kGone, kStopped)
  bool got_event = false;      // at least one event arrived (the connection was healthy)
  bool permanent = false;      // a response a retry cannot fix (e.g. 403)
  std::optional<std::chrono::milliseconds> retry_after;  // of a 429
  bool unanswered = false;  // no response, a 5xx or a 429: the API server did not answer (an outage)
};

class ListWatch {
 public:
  ListWatch(Client::Impl& im, const std::string& path, const ListOptions& options,
            const WatchHandlers& handlers, Deadline deadline)
      : im_(im),
        clock_(*im.clock),
        cancel_(im.current_cancel()),
        path_(path),
        options_(options),
        handlers_(handlers),
        deadline_(deadline),
        what_("watch " + list_path(path, options)),
        tick_(std::max(handlers.tick, std::chrono::milliseconds(1))) {}

  Status run() {
    bool need_list = true;
    int failures = 0;  // consecutive failed watch requests
    while (true) {
      if (auto e = stop_error()) return *e;
      if (need_list) {
        if (auto st = relist(); !st || done()) return st;
        need_list = false;
        failures = 0;
        continue;
      }
      StreamResult r = stream();
      if (r.end == StreamEnd::kDone) return {};
      if (auto e = stop_error()) return *e;
      if (r.end == StreamEnd::kStopped) return Error(what_ + ": stopped");
      if (r.got_event) failures = 0;
      if (r.got_event || r.end == StreamEnd::kClosed || r.end == StreamEnd::kGone)
        im_.outage_log.answered(clock_.now());
      if (r.end == StreamEnd::kGone) {
        spdlog::info("watch {}: resourceVersion {} is too old (410 Gone); listing again", path_,
                     resource_version_);
        need_list = true;
        continue;
      }
      if (r.end == StreamEnd::kClosed || r.end == StreamEnd::kUnauthorized) continue;  // watch again now
      if (r.permanent) return *r.error;
      auto next = retry_or_relist(*r.error, ++failures, r);
      if (next.outcome) return *next.outcome;
      if (next.relist) {
        need_list = true;
        failures = 0;
      }
    }
  }

 private:
  // Lists everything, hands it to on_sync, and remembers where the watch resumes.
  Status relist() {
    ListOptions lo = options_;
    lo.continue_token.clear();
    lo.resource_version.clear();
    lo.timeout_seconds = 0;
    if (lo.limit <= 0) lo.limit = 500;
    auto listed = im_.list_everything(path_, lo, ListItems::kWhole, &outage_, deadline_);
    if (!listed) return listed.error().wrap("watch " + path_);
    if (handlers_.on_sync) handlers_.on_sync(listed->first);
    resource_version_ = listed->second;
    return {};
  }

  // One watch request from resource_version_, handing events to on_event until it ends.
  StreamResult stream() {
    auto credentials = im_.current_credentials();
    if (!credentials) return {StreamEnd::kErrorEvent, credentials.error(), false, true, std::nullopt};
    auto tls = im_.current_tls();
    if (conn_ && conn_->tls_context() != tls) conn_.reset();  // it presents a replaced client certificate
    if (!conn_) {
      auto c = HttpConnection::create(im_.options.user_agent, std::move(tls));
      if (!c) return {StreamEnd::kErrorEvent, c.error(), false, true, std::nullopt};
      conn_ = std::move(*c);
    }
    ListOptions wo = options_;
    wo.resource_version = resource_version_;
    if (wo.timeout_seconds <= 0) wo.timeout_seconds = 300 + static_cast<int64_t>(im_.random01() * 300);
    const std::string wpath = watch_path(path_, wo);

    StreamResult r;
    std::string bad_line;
    std::optional<StatusFields> error_status;
    auto last_tick = clock_.now();
    LineSplitter lines;
    const auto on_line = [&](std::string_view line) -> bool {
      auto decoded = decode_watch_event(line);
      if (!decoded) {
        r.end = StreamEnd::kBadData;
        bad_line = std::string(line.substr(0, 200));
        return false;
      }
      WatchEvent& event = *decoded;
      if (event.type == "ERROR") {
        error_status = watch_error_status(event.object);
        r.end = error_status->code == 410 ? StreamEnd::kGone : StreamEnd::kErrorEvent;
        return false;
      }
      r.got_event = true;
      if (event.object.is_object() && event.object.contains("metadata")) {
        const Json& md = event.object["metadata"];
        if (md.is_object() && md.contains("resourceVersion") && md["resourceVersion"].is_string()) {
          resource_version_ = md["resourceVersion"].get<std::string>();
        }
      }
      if (event.type == "BOOKMARK") return true;
      if (options_.reduce && event.object.is_object()) options_.reduce(event.object);
      if (handlers_.on_event) handlers_.on_event(event);
      if (done()) {
        r.end = StreamEnd::kDone;
        return false;
      }
      last_tick = clock_.now();
      return true;
    };

    HttpRequest req;
    req.method = "GET";
    req.url = im_.url(wpath);
    req.bearer_token = credentials->token;
    // No transfer timeout (the server ends the stream after timeoutSeconds); keep a generous cap in case the
    // peer vanishes without closing the connection.
    req.timeout = std::chrono::milliseconds((wo.timeout_seconds + 60) * 1000);
    req.poll_interval = std::min(tick_, std::chrono::milliseconds(100));
    req.on_body = [&](std::string_view chunk) { return lines.feed(chunk, on_line); };
    req.keep_going = [&] {
      if (stop_error()) {
        r.end = StreamEnd::kStopped;
        return false;
      }
      if (clock_.now() - last_tick >= tick_) {
        last_tick = clock_.now();
        if (done()) {
          r.end = StreamEnd::kDone;
          return false;
        }
      }
      return true;
    };
    spdlog::debug("watch {} from resourceVersion {}", path_, resource_version_);
    const HttpResponse resp = conn_->perform(req);
    im_.requests.fetch_add(1, std::memory_order_relaxed);

    return outcome(std::move(r), resp, *credentials, wpath, bad_line, error_status);
  }

  // How the stream ended, from what the event handler saw and the response.
  StreamResult outcome(StreamResult r, const HttpResponse& resp, const Credentials& credentials,
                       const std::string& wpath, const std::string& bad_line,
                       const std::optional<StatusFields>& error_status) {
    switch (r.end) {
      case StreamEnd::kDone:
      case StreamEnd::kStopped:
      case StreamEnd::kGone:
        return r;
      case StreamEnd::kErrorEvent: {
        const StatusFields& st = *error_status;
        Error e(fmt::format("GET {}: watch error: {} ({}{}{})", wpath, st.message, st.code,
                            st.reason.empty() ? "" : " ", st.reason),
                st.code, st.reason);
        e.causes = st.causes;
        r.error = std::move(e);
        return r;
      }
      case StreamEnd::kBadData:
        r.error = Error(fmt::format("GET {}: not a watch event: {}", wpath, bad_line));
        return r;
      case StreamEnd::kClosed:
      case StreamEnd::kUnauthorized:
        break;
    }
    if (!resp.transport_error.empty()) {
      outage_.unreachable(clock_.now());
      r.unanswered = true;
      r.error = transport_error("GET", wpath, im_.config.server, resp.transport_error);
    } else if (resp.status == 410) {
      r.end = StreamEnd::kGone;
    } else if (resp.status == 401 && im_.credentials->renew_after_unauthorized(credentials)) {
      r.end = StreamEnd::kUnauthorized;
    } else if (!is_2xx(resp.status)) {
      r.error = api_error("GET", wpath, resp.status, resp.body);
      // e.g. 403: retrying will not help, unless this watch just met the server restarting (OutageWindow)
      r.permanent = !retryable_status(resp.status) &&
                    !(resp.status == 403 && outage_.forbidden_is_restart(clock_.now()));
      if (resp.status == 429) r.retry_after = parse_retry_after(resp.retry_after);
      r.unanswered = retryable_status(resp.status);
    }
    // Otherwise the server ended the stream normally (timeoutSeconds): kClosed, resume at once.
    if (r.error) r.end = StreamEnd::kErrorEvent;
    return r;
  }

  struct Next {
    std::optional<Status> outcome;  // list_watch ends with this
    bool relist = false;            // start over with a fresh list
  };

  // After the `failures`-th failed stream in a row: wait with backoff and watch again, or, when the trouble
  // persists, start over with a fresh list (which is tried until the watch's deadline, and reports its own
  // errors).
  static constexpr int kRelistAfter = 5;
  Next retry_or_relist(const Error& err, int failures, const StreamResult& r) {
    if (failures > kRelistAfter) {
      say(err, r.unanswered, "listing again");
      return {std::nullopt, true};
    }
    const auto delay = backoff_delay(im_.retry, failures - 1, im_.random01(), r.retry_after);
    say(err, r.unanswered, "watching again in " + format_duration(delay, DurationStyle::kWholeSeconds));
    return {wait(delay), false};
  }

  // A failed stream: an outage goes into the client's outage lines, anything else is a warning of its own.
  void say(const Error& err, bool unanswered, const std::string& next) const {
    if (!unanswered) {
      spdlog::warn("{}; {}", err.message, next);
      return;
    }
    std::optional<Duration> left;
    if (!deadline_.unlimited()) left = deadline_.remaining(clock_);
    im_.outage_log.unanswered(clock_.now(), err.message, left,
                              err.http_status == 429 ? Unanswered::kTooManyRequests : Unanswered::kNoAnswer);
    spdlog::debug("{}; {}", err.message, next);
  }

  [[nodiscard]] bool done() const { return handlers_.done && handlers_.done(); }

  // Why the watch must stop now, if it must.
  [[nodiscard]] std::optional<Error> stop_error() const {
    if (cancel_.cancelled()) return Error::cancellation(what_ + ": cancelled");
    if (deadline_.passed(clock_)) return Error(what_ + ": timed out before the awaited condition was met");
    return std::nullopt;
  }

  // Sleeps `d` in slices of at most `tick`, checking done() between them; a value when list_watch ends.
  std::optional<Status> wait(std::chrono::milliseconds d) const {
    const auto end = clock_.now() + d;
    while (clock_.now() < end) {
      const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock_.now());
      auto slice = std::min(rest, tick_);
      const auto left = deadline_.remaining(clock_);
      if (left < slice) slice = std::chrono::duration_cast<std::chrono::milliseconds>(left);
      if (!clock_.sleep_for(slice, cancel_)) return Status(Error::cancellation(what_ + ": cancelled"));
      if (auto e = stop_error()) return Status(*e);
      if (done()) return Status();
    }
    return std::nullopt;
  }

  Client::Impl& im_;
  const Clock& clock_;
  const CancelToken cancel_;
  const std::string& path_;
  const ListOptions& options_;
  const WatchHandlers& handlers_;
  const Deadline deadline_;
  const std::string what_;
  const std::chrono::milliseconds tick_;
  std::unique_ptr<HttpConnection> conn_;  // a connection of its own: a watch holds it for minutes
  std::string resource_version_;
  OutageWindow outage_;  // when this watch (its lists and streams) last met the server unreachable
};

}  // namespace

std::optional<WatchEvent> decode_watch_event(std::string_view line) {
  auto ev = parse_response(line);
  if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string()) return std::nullopt;
  return WatchEvent{ev["type"].get<std::string>(), ev.contains("object") ? std::move(ev["object"]) : Json()};
}

StatusFields watch_error_status(const Json& object) {
  if (auto st = parse_status(object)) return std::move(*st);
  // Not a proper Status: take what it has.
  StatusFields st;
  if (!object.is_object()) return st;
  if (const auto code = object.find("code"); code != object.end() && code->is_number_integer())
    st.code = code->get<int>();
  for (auto [key, field] : {std::pair{"message", &st.message}, std::pair{"reason", &st.reason}}) {
    if (const auto v = object.find(key); v != object.end() && v->is_string()) *field = v->get<std::string>();
  }
  return st;
}

Status Client::list_watch(const std::string& path, const ListOptions& options, const WatchHandlers& handlers,
                          Deadline deadline) {
  return ListWatch(*impl_, path, options, handlers, deadline).run();
}

}  // namespace dm::kube
