#include "kube/client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <optional>

#include "common/duration_text.h"
#include "common/log.h"
#include "kube/client_impl.h"
#include "kube/errors.h"
#include "kube/list_stream.h"
#include "kube/objects.h"

namespace dm::kube {

using Json = nlohmann::json;
namespace {

bool is_2xx(long status) {
  return status >= 200 && status < 300;
}

Json delete_options_json(const DeleteOptions& o) {
  Json j = Json::object();
  if (o.grace_period_seconds) j["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (o.uid || o.resource_version) {
    Json pre = Json::object();
    if (o.uid) pre["uid"] = *o.uid;
    if (o.resource_version) pre["resourceVersion"] = *o.resource_version;
    j["preconditions"] = pre;
  }
  if (!o.propagation_policy.empty()) j["propagationPolicy"] = o.propagation_policy;
  return j;
}

bool drop_managed_fields(int /*depth*/, Json::parse_event_t event, Json& parsed) {
  return !(event == Json::parse_event_t::key && parsed.is_string() &&
           parsed.get_ref<const std::string&>() == "managedFields");
}

// An item keeps only its metadata (keys at depth 1), and of it (depth 2) only what names the object.
bool identity_fields(int depth, Json::parse_event_t event, Json& parsed) {
  if (event != Json::parse_event_t::key || !parsed.is_string()) return true;
  const auto& key = parsed.get_ref<const std::string&>();
  if (depth == 1) return key == "metadata";
  if (depth == 2) return key == "uid" || key == "name" || key == "namespace";
  return true;
}

enum class PathFor { kList, kWatch };

std::string query_path(const std::string& path, const ListOptions& options, PathFor what) {
  const bool watch = what == PathFor::kWatch;
  std::string p = path;
  if (watch) {
    append_query(p, "watch", "1");
    append_query(p, "allowWatchBookmarks", "true");
  }
  if (!options.label_selector.empty()) append_query(p, "labelSelector", options.label_selector);
  if (!options.field_selector.empty()) append_query(p, "fieldSelector", options.field_selector);
  if (!watch && options.limit > 0) append_query(p, "limit", std::to_string(options.limit));
  if (!watch && !options.continue_token.empty()) append_query(p, "continue", options.continue_token);
  if (!options.resource_version.empty()) append_query(p, "resourceVersion", options.resource_version);
  if (options.timeout_seconds > 0) append_query(p, "timeoutSeconds", std::to_string(options.timeout_seconds));
  return p;
}

}  // namespace

void append_query(std::string& path, const std::string& key, const std::string& value) {
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += key;
  path += '=';
  path += HttpConnection::escape(value);
}

Json parse_response(std::string_view text) {
  return Json::parse(text, drop_managed_fields, false);
}

Json parse_list_item(std::string_view text, ListItems items) {
  return Json::parse(text, items == ListItems::kIdentityOnly ? identity_fields : drop_managed_fields, false);
}

std::string list_path(const std::string& path, const ListOptions& options) {
  return query_path(path, options, PathFor::kList);
}

std::string watch_path(const std::string& path, const ListOptions& options) {
  return query_path(path, options, PathFor::kWatch);
}

bool replay_harmless(const std::string& method, const Json& body) {
  if (!body.is_object() && !(method == "PATCH" && body.is_array())) return false;
  if (method == "PATCH" && body.is_array()) {
    return std::any_of(body.begin(), body.end(),
                       [](const Json& op) { return op.is_object() && op.value("op", "") == "test"; });
  }
  const Json* meta = body.contains("metadata") && body["metadata"].is_object() ? &body["metadata"] : nullptr;
  const auto meta_string = [meta](const char* key) {
    return meta != nullptr && meta->contains(key) && (*meta)[key].is_string()
               ? (*meta)[key].get<std::string>()
               : std::string();
  };
  const auto has_preconditions = [](const Json& options) {
    return options.is_object() && options.contains("preconditions") && !options["preconditions"].empty();
  };
  if (method == "DELETE") return has_preconditions(body);
  if (method == "PUT" || method == "PATCH") return !meta_string("resourceVersion").empty();
  if (method == "POST") {
    const std::string kind = body.value("kind", "");
    if (kind == "Eviction") return body.contains("deleteOptions") && has_preconditions(body["deleteOptions"]);
    if (kind.size() > 6 && kind.compare(kind.size() - 6, 6, "Review") == 0) return true;
    return !meta_string("name").empty() && meta_string("generateName").empty();
  }
  return false;
}

double Client::Impl::random01() {
  std::lock_guard lock(rng_mu);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

namespace {

// One exchange on a pooled connection, returned to the pool even if perform() rethrows a handler's exception.
Result<HttpResponse> perform_pooled(Client::Impl& pool, const HttpRequest& req, bool bulk) {
  auto conn = pool.acquire(bulk);
  if (!conn) return conn.error();
  struct Lease {
    Client::Impl& pool;
    std::unique_ptr<HttpConnection> c;
    bool bulk;
    ~Lease() { pool.release(std::move(c), bulk); }
  } lease{pool, std::move(*conn), bulk};
  return lease.c->perform(req);
}

// The answer of a 2xx: the List parsed while it arrived, or the body's JSON (an empty body: an empty object).
Result<Json> success_answer(bool list, const HttpResponse& resp, std::optional<ListBodyParser>& list_body,
                            const std::string& what) {
  Json j;
  if (list) {
    j = list_body->finish();
    list_body.reset();
  } else if (resp.body.empty()) {
    return Json::object();
  } else {
    j = parse_response(resp.body);
  }
  if (j.is_discarded()) return Error(what + ": the API server sent a response that is not JSON");
  spdlog::debug("{} -> {}", what, resp.status);
  return j;
}

}  // namespace

Result<Json> Client::Impl::send(const Call& call) {
  HttpRequest req;
  req.method = call.method;
  req.url = url(call.path);
  req.body = call.body;
  req.content_type = call.content_type;
  req.timeout = options.request_timeout;
  const CancelToken cancel = current_cancel();
  req.keep_going = keep_going_until(cancel, call.method != "GET", options.write_settle);

  const std::string what = call.method + " " + call.path;
  // A List is parsed while it arrives (a fresh parser per attempt): its text is never held whole.
  std::optional<ListBodyParser> list_body;
  if (call.list) {
    req.on_body = [&list_body](std::string_view chunk) {
      list_body->feed(chunk);
      return true;
    };
  }
  const auto parse_item = [&call](std::string_view text) {
    Json item = parse_list_item(text, call.items);
    if (call.reduce != nullptr && *call.reduce && item.is_object()) (*call.reduce)(item);
    return item;
  };

  bool renewed_token = false;  // one repeat after a 401 per token change is enough
  OutageWindow own_outage;     // this request's, never another's
  OutageWindow& outage = call.outage != nullptr ? *call.outage : own_outage;
  RetryBudget tries(*clock, {call.deadline, RequestDeadline::current()}, options.retry_for);
  for (int attempt = 0;; ++attempt) {
    const TimePoint attempt_started = clock->now();
    if (cancel.cancelled()) return Error::cancellation(what + ": cancelled");
    auto credentials_now = current_credentials();
    if (!credentials_now) return credentials_now.error().wrap(what);
    req.bearer_token = credentials_now->token;
    if (call.list) list_body.emplace(parse_item);
    auto r = perform_pooled(*this, req, call.bulk);
    if (!r) return r.error().wrap(what);
    HttpResponse& resp = *r;
    requests.fetch_add(1, std::memory_order_relaxed);
    if (resp.aborted) return Error::cancellation(what + ": cancelled");
    if (resp.transport_error.empty() && is_2xx(resp.status)) {
      outage_log.answered(clock->now());
      return success_answer(call.list, resp, list_body, what);
    }
    Error err;
    if (!resp.transport_error.empty()) {
      resp.status = 0;  // a broken transfer: whatever status arrived is not the answer
      err = transport_error(call.method, call.path, config.server, resp.transport_error);
    } else {
      err = api_error(call.method, call.path, resp.status, resp.body);
    }
    spdlog::debug("{} -> {}", what, err.message);
    // A rotated token: the file may already hold the next one. Repeating the request is not a retry.
    if (err.unauthorized() && !renewed_token && credentials->renew_after_unauthorized(*credentials_now)) {
      renewed_token = true;
      --attempt;
      continue;
    }
    // A 403 shortly after this request found the server unreachable is the restart (OutageWindow).
    if (!resp.transport_error.empty()) outage.unreachable(clock->now());
    const bool starting_up = err.forbidden() && outage.forbidden_is_restart(clock->now());
    if (resp.transport_error.empty() && !retryable_status(resp.status) && !starting_up)
      outage_log.answered(clock->now());  // an answer, if not the one hoped for
    const Attempt sent{
        .request_sent = resp.request_sent, .replay_harmless = call.replay_harmless, .on_429 = call.on_429};
    if (!may_send_again(call.method, resp.status, sent) && !starting_up) return err;
    tries.spent(attempt_started, resp.status == 429);
    if (auto end = wait_to_retry(what, err, resp, attempt, tries, cancel)) return *end;
  }
}

std::optional<Error> Client::Impl::wait_to_retry(const std::string& what, const Error& err,
                                                 const HttpResponse& resp, int attempt, RetryBudget& tries,
                                                 const CancelToken& cancel) {
  const bool overloaded = resp.status == 429;
  const bool unlimited = tries.unlimited(overloaded);
  if (!unlimited && tries.left() <= Duration::zero()) {
    return attempt == 0 && tries.single_attempt() ? err : gave_up(err, tries.tried_for());
  }
  const Duration backoff = backoff_delay(retry, attempt, random01(), parse_retry_after(resp.retry_after));
  const Duration delay = unlimited ? backoff : std::min<Duration>(backoff, tries.left());
  outage_log.unanswered(clock->now(), err.message, unlimited ? std::nullopt : std::optional(tries.left()),
                        overloaded ? Unanswered::kTooManyRequests : Unanswered::kNoAnswer);
  spdlog::debug("{}; retrying in {}", err.message, format_duration(delay, DurationStyle::kWholeSeconds));
  const TimePoint wait_started = clock->now();
  if (!clock->sleep_for(delay, cancel)) return Error::cancellation(what + ": cancelled");
  tries.spent(wait_started, overloaded);
  return std::nullopt;
}

Result<std::pair<std::vector<Json>, std::string>> Client::Impl::list_everything(
    const std::string& path, const ListOptions& list_options, ListItems keep, OutageWindow* outage,
    Deadline deadline) {
  std::vector<Json> items;
  std::string resource_version;
  ListOptions page = list_options;
  bool restarted = false;
  while (true) {
    const std::function<void(Json&)>* reduce = list_options.reduce ? &list_options.reduce : nullptr;
    const Call call{.path = list_path(path, page),
                    .list = true,
                    .items = keep,
                    .reduce = reduce,
                    .outage = outage,
                    .deadline = deadline};
    auto list = send(call);
    if (!list) {
      // An expired continue token: like client-go's pager, fall back to one unpaged list.
      if (list.error().gone() && !page.continue_token.empty() && !restarted) {
        spdlog::info("{}: continue token expired; listing again without paging", path);
        restarted = true;
        items.clear();
        page = list_options;
        page.limit = 0;
        page.continue_token.clear();
        continue;
      }
      return list.error();
    }
    Json& l = *list;
    // Items of a List carry no kind/apiVersion; restore them so they can be used as object references.
    std::string kind = l.value("kind", "");
    if (kind.size() > 4 && kind.ends_with("List")) kind.resize(kind.size() - 4);
    const std::string api_version = l.value("apiVersion", "");
    if (l.contains("items") && l["items"].is_array()) {
      for (auto& item : l["items"]) {
        if (!item.is_object()) continue;
        if (!kind.empty() && !item.contains("kind")) item["kind"] = kind;
        if (!api_version.empty() && !item.contains("apiVersion")) item["apiVersion"] = api_version;
        items.push_back(std::move(item));
      }
    }
    resource_version = string_at(l, {"metadata", "resourceVersion"});
    page.continue_token = string_at(l, {"metadata", "continue"});
    if (page.continue_token.empty()) break;
  }
  return std::make_pair(std::move(items), std::move(resource_version));
}

Result<std::string> Client::Impl::discover_eviction_version() {
  std::lock_guard lock(eviction_mu);
  if (!eviction_group_version.empty()) return eviction_group_version;
  auto res = send(Call{.path = "/api/v1"});
  if (!res) return res.error().wrap("discovering the Eviction API version");
  std::string gv;
  if (res->contains("resources") && (*res)["resources"].is_array()) {
    for (const auto& r : (*res)["resources"]) {
      if (!r.is_object() || r.value("name", "") != "pods/eviction") continue;
      const std::string group = r.value("group", "");
      const std::string version = r.value("version", "");
      // Servers before 1.8 do not name the version; they serve only v1beta1.
      gv = group == "policy" && version == "v1" ? "policy/v1" : "policy/v1beta1";
    }
  }
  if (gv.empty()) {
    return Error("the API server " + config.server +
                 " does not serve the pods/eviction subresource (GET /api/v1 lists no pods/eviction); pods "
                 "cannot be evicted");
  }
  spdlog::debug("eviction API: {}", gv);
  eviction_group_version = gv;
  return gv;
}

Client::Client() : impl_(std::make_unique<Impl>()) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(const Config& config, ClientOptions options) {
  if (config.server.empty()) return Error("no API server address in " + config.source);
  auto tls = HttpConnection::tls_settings(config);
  if (!tls) return tls.error();
  auto conn = HttpConnection::create(options.user_agent, *tls);
  if (!conn) return conn.error();
  std::unique_ptr<Client> c(new Client());
  Impl& im = *c->impl_;
  im.config = config;
  im.options = std::move(options);
  im.clock = im.options.clock != nullptr ? im.options.clock : &im.system_clock;
  im.retry = RetryPolicy{im.options.retry_base, im.options.retry_max};
  im.credentials = make_credential_source(config, *im.clock, im.options.token_refresh);
  im.tls = std::move(*tls);
  im.idle.push_back(std::move(*conn));
  im.open_connections = 1;
  return c;
}

Result<std::unique_ptr<HttpConnection>> Client::Impl::acquire(bool bulk) {
  std::unique_lock lock(pool_mu);
  pool_cv.wait(lock, [&] {
    if (bulk && bulk_in_use >= kMaxConnections - kReservedConnections) return false;
    return !idle.empty() || open_connections < kMaxConnections;
  });
  if (bulk) ++bulk_in_use;
  if (!idle.empty()) {
    auto c = std::move(idle.back());
    idle.pop_back();
    return c;
  }
  ++open_connections;
  auto settings = tls;
  lock.unlock();
  auto c = HttpConnection::create(options.user_agent, std::move(settings));
  if (!c) {
    const std::lock_guard relock(pool_mu);
    --open_connections;
    if (bulk) --bulk_in_use;
    pool_cv.notify_all();
  }
  return c;
}

void Client::Impl::release(std::unique_ptr<HttpConnection> c, bool bulk) {
  {
    const std::lock_guard lock(pool_mu);
    if (c->tls_context() == tls) {
      idle.push_back(std::move(c));
    } else {
      --open_connections;  // it presents a client certificate that was replaced since
    }
    if (bulk) --bulk_in_use;
  }
  pool_cv.notify_all();  // bulk and other waiters wait for different things
}

Result<Credentials> Client::Impl::current_credentials() {
  auto now = credentials->current();
  if (!now || now->client_cert_pem.empty()) return now;
  const std::lock_guard lock(pool_mu);
  if (now->client_cert_pem == tls_client_cert) return now;
  Config with_cert = config;
  with_cert.client_cert_file.clear();
  with_cert.client_key_file.clear();
  with_cert.client_cert_data = now->client_cert_pem;
  with_cert.client_key_data = now->client_key_pem;
  auto settings = HttpConnection::tls_settings(with_cert);
  if (!settings) return settings.error().wrap("the client certificate of the exec credential plugin");
  tls = std::move(*settings);
  tls_client_cert = now->client_cert_pem;
  open_connections -= idle.size();
  idle.clear();
  pool_cv.notify_all();
  return now;
}

Result<Json> Client::get(const std::string& path) {
  return impl_->send({.path = path});
}

Result<std::vector<Json>> Client::list_all(const std::string& path, const ListOptions& options) {
  auto r = impl_->list_everything(path, options);
  if (!r) return r.error();
  return std::move(r->first);
}

Result<std::vector<Json>> Client::list_identities(const std::string& path, const ListOptions& options) {
  auto r = impl_->list_everything(path, options, ListItems::kIdentityOnly);
  if (!r) return r.error();
  return std::move(r->first);
}

Result<Json> Client::create(const std::string& path, const Json& body) {
  Impl::Call call{.method = "POST", .path = path, .body = body.dump(), .content_type = "application/json"};
  call.replay_harmless = replay_harmless(call.method, body);
  return impl_->send(call);
}

Result<Json> Client::patch(const std::string& path, PatchType type, const Json& body) {
  const char* ct = "application/strategic-merge-patch+json";
  if (type == PatchType::kMerge) ct = "application/merge-patch+json";
  if (type == PatchType::kJsonPatch) ct = "application/json-patch+json";
  Impl::Call call{.method = "PATCH", .path = path, .body = body.dump(), .content_type = ct};
  // A merge patch states the end result (fields set to values, or removed): sending it twice leaves the
  // object as sending it once. A JSON patch's operations may not be repeatable.
  call.replay_harmless = type != PatchType::kJsonPatch || replay_harmless(call.method, body);
  return impl_->send(call);
}

Result<Json> Client::remove(const std::string& path, const DeleteOptions& options) {
  Json body = delete_options_json(options);
  body["kind"] = "DeleteOptions";
  body["apiVersion"] = "v1";
  Impl::Call call{.method = "DELETE", .path = path, .body = body.dump(), .content_type = "application/json"};
  call.replay_harmless = replay_harmless(call.method, body);
  return impl_->send(call);
}

Status Client::evict(const std::string& ns, const std::string& name, const DeleteOptions& options) {
  auto gv = impl_->discover_eviction_version();
  if (!gv) return gv.error();
  Json body = {{"apiVersion", *gv},
               {"kind", "Eviction"},
               {"metadata", {{"name", name}, {"namespace", ns}}},
               {"deleteOptions", delete_options_json(options)}};
  // 429 means a PodDisruptionBudget blocks the eviction: the caller decides whether and when to try again.
  Impl::Call call{.method = "POST",
                  .path = paths::pod(ns, name) + "/eviction",
                  .body = body.dump(),
                  .content_type = "application/json",
                  .on_429 = On429::kReturn,
                  .bulk = true};
  call.replay_harmless = replay_harmless(call.method, body);
  auto r = impl_->send(call);
  if (!r) return r.error();
  return {};
}

Status Client::create_event(const Json& involved_object, const std::string& reason,
                            const std::string& message, const std::string& type) {
  auto ev = event_object(involved_object, reason, message, type, impl_->options.user_agent,
                         rfc3339(impl_->clock->wall_now()));
  if (!ev) return ev.error();
  const Json& ref = (*ev)["involvedObject"];
  auto r = create("/api/v1/namespaces/" + string_at(*ev, {"metadata", "namespace"}) + "/events", *ev);
  if (!r)
    return r.error().wrap("cannot record event " + reason + " on " + ref.value("kind", "") + " " +
                          ref.value("name", ""));
  return {};
}

std::optional<TimePoint> Client::outage_ended_at() const {
  return impl_->outage_log.last_ended();
}

uint64_t Client::request_count() const {
  return impl_->requests.load(std::memory_order_relaxed);
}

const Config& Client::config() const {
  return impl_->config;
}

}  // namespace dm::kube
