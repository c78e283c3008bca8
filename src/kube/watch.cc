// Client::list_watch: list, then stream changes, resuming from the last resourceVersion and re-listing when
// the server no longer has the history (410 Gone).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "kube/client.h"
#include "kube/client_impl.h"
#include "kube/errors.h"
#include "kube/watch_stream.h"

namespace dm::kube {
namespace {

bool is_2xx(long status) {
  return status >= 200 && status < 300;
}

// Why one watch request ended.
enum class StreamEnd {
  kClosed,      // the server ended the stream (timeoutSeconds) or the connection dropped
  kDone,        // handlers.done() returned true
  kStopped,     // cancelled or past the deadline
  kGone,        // 410: the resourceVersion is too old, re-list
  kErrorEvent,  // an ERROR event other than 410
  kBadData,     // a line that is not a watch event
};

}  // namespace

Status Client::list_watch(const std::string& path, const ListOptions& options, const WatchHandlers& handlers,
                          Deadline deadline) {
  Impl& im = *impl_;
  const Clock& clock = *im.clock;
  const CancelToken cancel = im.options.cancel;
  const std::string what = "watch " + list_path(path, options);
  const auto done = [&] { return handlers.done && handlers.done(); };
  // Why the watch must stop now, if it must.
  const auto stop_error = [&]() -> std::optional<Error> {
    if (cancel.cancelled()) return Error(what + ": cancelled");
    if (deadline.passed(clock)) return Error(what + ": timed out before the awaited condition was met");
    return std::nullopt;
  };
  const auto tick = std::max(handlers.tick, std::chrono::milliseconds(1));
  // Sleeps `d` in slices of at most `tick`, checking done() between them.
  const auto wait = [&](std::chrono::milliseconds d) -> std::optional<Status> {
    const auto end = clock.now() + d;
    while (clock.now() < end) {
      const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock.now());
      auto slice = std::min(rest, tick);
      const auto left = deadline.remaining(clock);
      if (left < slice) slice = std::chrono::duration_cast<std::chrono::milliseconds>(left);
      if (!clock.sleep_for(slice, cancel)) return Status(Error(what + ": cancelled"));
      if (auto e = stop_error()) return Status(*e);
      if (done()) return Status();
    }
    return std::nullopt;
  };

  std::unique_ptr<HttpConnection> stream_conn;  // a connection of its own: a watch holds it for minutes
  std::string resource_version;
  bool need_list = true;
  int failures = 0;  // consecutive failed watch attempts

  while (true) {
    if (auto e = stop_error()) return *e;
    if (need_list) {
      ListOptions lo = options;
      lo.continue_token.clear();
      lo.resource_version.clear();
      lo.timeout_seconds = 0;
      if (lo.limit <= 0) lo.limit = 500;
      auto listed = im.list_everything(path, lo);
      if (!listed) return listed.error().wrap("watch " + path);
      if (handlers.on_sync) handlers.on_sync(listed->first);
      if (done()) return {};
      resource_version = listed->second;
      need_list = false;
      failures = 0;
      continue;
    }

    if (!stream_conn) {
      auto c = HttpConnection::create(im.config, im.options.user_agent);
      if (!c) return c.error();
      stream_conn = std::move(*c);
    }
    ListOptions wo = options;
    wo.resource_version = resource_version;
    if (wo.timeout_seconds <= 0) wo.timeout_seconds = 300 + static_cast<int64_t>(im.random01() * 300);
    const std::string wpath = list_path(path, wo, /*watch=*/true);

    StreamEnd end = StreamEnd::kClosed;
    std::string error_message;
    int error_code = 0;
    std::string error_reason;
    bool got_event = false;
    auto last_tick = clock.now();
    LineSplitter lines;

    const auto on_line = [&](std::string_view line) -> bool {
      auto ev = Json::parse(line, nullptr, false);
      if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string()) {
        end = StreamEnd::kBadData;
        error_message = "not a watch event: " + std::string(line.substr(0, 200));
        return false;
      }
      WatchEvent event{ev["type"].get<std::string>(),
                       ev.contains("object") ? std::move(ev["object"]) : Json()};
      if (event.type == "ERROR") {
        const Json& st = event.object;
        error_code = st.is_object() ? st.value("code", 0) : 0;
        error_reason = st.is_object() ? st.value("reason", "") : "";
        error_message = st.is_object() ? st.value("message", "") : "";
        end = error_code == 410 ? StreamEnd::kGone : StreamEnd::kErrorEvent;
        return false;
      }
      got_event = true;
      if (event.object.is_object() && event.object.contains("metadata")) {
        const Json& md = event.object["metadata"];
        if (md.is_object() && md.contains("resourceVersion") && md["resourceVersion"].is_string()) {
          resource_version = md["resourceVersion"].get<std::string>();
        }
      }
      if (event.type == "BOOKMARK") return true;
      if (handlers.on_event) handlers.on_event(event);
      if (done()) {
        end = StreamEnd::kDone;
        return false;
      }
      last_tick = clock.now();
      return true;
    };

    HttpRequest req;
    req.method = "GET";
    req.url = im.url(wpath);
    // No transfer timeout (the server ends the stream after timeoutSeconds); keep a generous cap in case the
    // peer vanishes without closing the connection.
    req.timeout = std::chrono::milliseconds((wo.timeout_seconds + 60) * 1000);
    req.poll_interval = std::min(tick, std::chrono::milliseconds(100));
    req.on_body = [&](std::string_view chunk) { return lines.feed(chunk, on_line); };
    req.keep_going = [&] {
      if (stop_error()) {
        end = StreamEnd::kStopped;
        return false;
      }
      if (clock.now() - last_tick >= tick) {
        last_tick = clock.now();
        if (done()) {
          end = StreamEnd::kDone;
          return false;
        }
      }
      return true;
    };
    spdlog::debug("watch {} from resourceVersion {}", path, resource_version);
    const HttpResponse resp = stream_conn->perform(req);
    im.requests.fetch_add(1, std::memory_order_relaxed);

    if (end == StreamEnd::kDone) return {};
    if (auto e = stop_error()) return *e;
    if (got_event) failures = 0;
    if (end == StreamEnd::kStopped) return Error(what + ": stopped");

    if (end == StreamEnd::kGone || (resp.status == 410 && resp.transport_error.empty())) {
      spdlog::info("watch {}: resourceVersion {} is too old (410 Gone); listing again", path,
                   resource_version);
      need_list = true;
      continue;
    }
    Error err;
    if (end == StreamEnd::kErrorEvent) {
      err = Error(fmt::format("GET {}: watch error: {} ({}{}{})", wpath, error_message, error_code,
                              error_reason.empty() ? "" : " ", error_reason),
                  error_code, error_reason);
    } else if (end == StreamEnd::kBadData) {
      err = Error(fmt::format("GET {}: {}", wpath, error_message));
    } else if (!resp.transport_error.empty()) {
      err = transport_error("GET", wpath, im.config.server, resp.transport_error);
    } else if (!is_2xx(resp.status)) {
      err = api_error("GET", wpath, resp.status, resp.body);
      if (!retryable_status(resp.status)) return err;  // e.g. 403: retrying will not help
    } else {
      // The server ended the stream normally (timeoutSeconds): resume at once.
      continue;
    }

    if (++failures > im.retry.max_retries) {
      // Persistent trouble: start over with a fresh list (which reports its own errors).
      spdlog::warn("{}; listing again", err.message);
      need_list = true;
      failures = 0;
      continue;
    }
    const auto delay = backoff_delay(im.retry, failures - 1, im.random01(),
                                     resp.status == 429 ? parse_retry_after(resp.retry_after) : std::nullopt);
    spdlog::warn("{}; watching again in {} ms", err.message, delay.count());
    if (auto st = wait(delay)) return *st;
  }
}

}  // namespace dm::kube
