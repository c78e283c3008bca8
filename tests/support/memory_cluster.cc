#include "support/memory_cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "kube/errors.h"
#include "kube/objects.h"
#include "kube/retry.h"
#include "kube/stopped_by.h"
#include "manager/rules/label_selector.h"
#include "support/memory_patch.h"

namespace dm::test {

using Json = nlohmann::json;

thread_local bool MemoryCluster::t_controller = false;

namespace {

using Ref = MemoryCluster::Ref;

const std::map<std::string, std::string>& kinds() {
  static const std::map<std::string, std::string> k = {
      {"pods", "Pod"},
      {"nodes", "Node"},
      {"namespaces", "Namespace"},
      {"events", "Event"},
      {"daemonsets", "DaemonSet"},
      {"replicasets", "ReplicaSet"},
      {"deployments", "Deployment"},
      {"poddisruptionbudgets", "PodDisruptionBudget"},
      {"resourceclaims", "ResourceClaim"},
      {"resourceslices", "ResourceSlice"},
      {"runtimeclasses", "RuntimeClass"},
      {"leases", "Lease"},
      {"selfsubjectaccessreviews", "SelfSubjectAccessReview"},
  };
  return k;
}

std::string resource_of_kind(const std::string& kind) {
  for (const auto& [resource, k] : kinds()) {
    if (k == kind) return resource;
  }
  return {};
}

bool cluster_scoped(const std::string& resource) {
  return resource == "nodes" || resource == "namespaces" || resource == "runtimeclasses" ||
         resource == "resourceslices" || resource == "selfsubjectaccessreviews";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::optional<Ref> MemoryCluster::parse_path(const std::string& path) {
  auto parts = split(path.substr(0, path.find('?')), '/');
  if (parts.size() < 3 || !parts[0].empty()) return std::nullopt;
  Ref r;
  size_t i = 0;
  if (parts[1] == "api") {
    r.version = parts[2];
    i = 3;
  } else if (parts[1] == "apis" && parts.size() >= 4) {
    r.group = parts[2];
    r.version = parts[3];
    i = 4;
  } else {
    return std::nullopt;
  }
  if (i + 1 < parts.size() && parts[i] == "namespaces" && i + 2 < parts.size()) {
    r.ns = parts[i + 1];
    i += 2;
  }
  if (i >= parts.size()) return std::nullopt;
  r.resource = parts[i++];
  if (i < parts.size()) r.name = parts[i++];
  if (i < parts.size()) r.sub = parts[i++];
  return r;
}

namespace {

std::string now_rfc3339() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A failed answer as the API server words it, turned into the client's Error.
Error status_error(const std::string& verb, const std::string& path, int code, const std::string& reason,
                   const std::string& message, const Json& details = Json::object()) {
  const Json body = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                     {"status", "Failure"}, {"message", message}, {"reason", reason},
                     {"details", details},  {"code", code}};
  return kube::api_error(verb, path, code, body.dump());
}

std::string http_method(const std::string& verb) {
  if (verb == "get" || verb == "list" || verb == "watch") return "GET";
  if (verb == "create" || verb == "evict") return "POST";
  if (verb == "patch") return "PATCH";
  if (verb == "delete") return "DELETE";
  return "PUT";
}

Error not_found(const std::string& verb, const std::string& path, const Ref& r) {
  return status_error(http_method(verb), path, 404, "NotFound", r.resource + " \"" + r.name + "\" not found",
                      {{"name", r.name}, {"kind", r.resource}});
}

Error conflict(const std::string& verb, const std::string& path, const Ref& r) {
  return status_error(http_method(verb), path, 409, "Conflict",
                      "Operation cannot be fulfilled on " + r.resource + " \"" + r.name +
                          "\": the object has been modified; please apply your changes to the latest version "
                          "and try again",
                      {{"name", r.name}, {"kind", r.resource}});
}

const char* reason_of(int status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "InternalError";
  }
}

// Equality field selectors (`a.b=v`, `a.b==v`, `a.b!=v`, comma-separated) over the object's dotted fields.
bool field_selector_matches(const std::string& selector, const Json& obj) {
  if (selector.empty()) return true;
  for (const auto& term : split(selector, ',')) {
    if (term.empty()) continue;
    const bool negate = term.find("!=") != std::string::npos;
    const size_t op = negate ? term.find("!=") : term.find('=');
    if (op == std::string::npos) return false;
    const std::string field = term.substr(0, op);
    std::string value = term.substr(op + (negate ? 2 : 1));
    if (!value.empty() && value[0] == '=') value.erase(0, 1);
    const Json* at = &obj;
    for (const auto& part : split(field, '.')) {
      at = at->is_object() && at->contains(part) ? &(*at)[part] : nullptr;
      if (at == nullptr) break;
    }
    const std::string actual = at != nullptr && at->is_string() ? at->get<std::string>() : std::string();
    if ((actual == value) == negate) return false;
  }
  return true;
}

}  // namespace

bool MemoryCluster::selected(const Json& obj, const kube::ListOptions& options) {
  if (obj.is_null()) return false;
  if (!field_selector_matches(options.field_selector, obj)) return false;
  if (options.label_selector.empty()) return true;
  auto sel = manager::LabelSelector::parse(options.label_selector);
  const Json* labels = kube::find(obj, {"metadata", "labels"});
  return sel && sel->matches(labels != nullptr ? *labels : Json());
}

namespace {

Json identity(const Json& obj) {
  Json meta = Json::object();
  for (const char* k : {"uid", "name", "namespace"}) {
    if (obj["metadata"].contains(k)) meta[k] = obj["metadata"][k];
  }
  return {{"kind", obj.value("kind", "")}, {"apiVersion", obj.value("apiVersion", "")}, {"metadata", meta}};
}

int64_t number_or(const Json& j, std::initializer_list<std::string_view> path, int64_t fallback) {
  const Json* v = kube::find(j, path);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

}  // namespace

Json memory_node(const std::string& name, const std::map<std::string, std::string>& labels) {
  Json l = {{"kubernetes.io/hostname", name}};
  for (const auto& [k, v] : labels) l[k] = v;
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", l}}},
          {"spec", Json::object()}};
}

MemoryCluster::MemoryCluster() = default;

MemoryCluster::~MemoryCluster() {
  stop_ = true;
  changed_.notify_all();
  if (daemonsets_.joinable()) daemonsets_.join();
}

void MemoryCluster::fail(Fault fault) {
  std::lock_guard lk(mu_);
  faults_.push_back(std::move(fault));
}

void MemoryCluster::clear_faults() {
  std::lock_guard lk(mu_);
  faults_.clear();
}

void MemoryCluster::set_down(bool down) {
  std::lock_guard lk(mu_);
  down_ = down;
}

void MemoryCluster::deny_access(const std::string& verb, const std::string& resource) {
  std::lock_guard lk(mu_);
  denied_.insert(verb + " " + resource);
}

std::vector<std::string> MemoryCluster::requests() const {
  std::lock_guard lk(mu_);
  return requests_;
}

// Every request passes here first (mu_ held): the log, cancellation, the server being down, faults.
Status MemoryCluster::admit(const std::string& verb, const std::string& path, bool* applied_then_lost,
                            const Json* body) {
  if (t_controller) return ok_status();  // the stand-in controllers are not clients
  const std::string method = http_method(verb);
  requests_.push_back(method + " " + path);
  // Stopped by the token of the view it was sent through (kube::StoppedBy); never without one.
  if (const CancelToken* stop = kube::StoppedBy::current(); stop != nullptr && stop->cancelled())
    return Error::cancellation(method + " " + path + ": cancelled");
  if (down_) return kube::transport_error(method, path, "memory://cluster", "connection refused");
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->hold) continue;  // hold_if_silent()'s
    if (!it->verb.empty() && it->verb != verb) continue;
    if (!it->path_part.empty() && path.find(it->path_part) == std::string::npos) continue;
    if (!it->body_part.empty() && (body == nullptr || body->dump().find(it->body_part) == std::string::npos))
      continue;
    const Fault f = *it;
    if (it->times > 0 && --it->times == 0) faults_.erase(it);
    if (f.then_silent) silent_ = true;
    if (f.status == 0) {
      if (f.applied && applied_then_lost != nullptr) {
        *applied_then_lost = true;
        return ok_status();
      }
      return kube::transport_error(method, path, "memory://cluster", "timed out");
    }
    return status_error(method, path, f.status, reason_of(f.status), "injected fault");
  }
  return ok_status();
}

Status MemoryCluster::hold_if_silent(const std::string& verb, const std::string& path, Deadline deadline) {
  if (t_controller) return ok_status();
  const std::string method = http_method(verb);
  const CancelToken* view = kube::StoppedBy::current();
  const CancelToken token = view != nullptr ? *view : CancelToken();
  Duration late{};  // a fault's delay: the answer (admit()'s) comes after it
  bool hold = silent_;
  {
    std::lock_guard lk(mu_);
    for (auto it = faults_.begin(); !hold && it != faults_.end(); ++it) {
      if (!it->verb.empty() && it->verb != verb) continue;
      if (!it->path_part.empty() && path.find(it->path_part) == std::string::npos) continue;
      if (!it->hold) {
        late = std::max(late, it->delay);
        continue;
      }
      hold = true;
      if (it->times > 0 && --it->times == 0) faults_.erase(it);
      break;
    }
    if (hold) requests_.push_back(method + " " + path);
  }
  if (!hold) {
    if (late > Duration::zero() && !clock_->sleep_for(late, token))
      return Error::cancellation(method + " " + path + ": cancelled");
    return ok_status();
  }
  // What kube::Client tries a request for without a deadline of its own (ClientOptions::retry_for).
  constexpr Duration kClientRetryFor = std::chrono::minutes(5);
  const Deadline until = deadline.earlier(kube::RequestDeadline::current());
  const Duration budget = until.unlimited() ? kClientRetryFor : until.remaining(*clock_);
  const TimePoint started = clock_->now();
  if (!clock_->sleep_for(budget, token)) return Error::cancellation(method + " " + path + ": cancelled");
  return kube::gave_up(kube::transport_error(method, path, "memory://cluster", "no answer"),
                       clock_->now() - started);
}

void MemoryCluster::record(const std::string& type, const std::string& key, const Json& object,
                           const Json& before) {
  const auto slash = key.find('/', key.find('/') + 1);
  const auto ns_end = key.find('/', slash + 1);
  changes_.push_back(
      {rv_, type, key.substr(0, slash), key.substr(slash + 1, ns_end - slash - 1), object, before});
  changed_.notify_all();
}

Result<Json> MemoryCluster::get(const std::string& path) {
  if (auto h = hold_if_silent("get", path); !h) return h.error();
  std::lock_guard lk(mu_);
  if (auto a = admit("get", path, nullptr); !a) return a.error();
  auto ref = parse_path(path);
  if (!ref)
    return status_error("GET", path, 404, "NotFound", "the server could not find the requested resource");
  auto it = store_.find(ref->key());
  if (it == store_.end()) return not_found("get", path, *ref);
  return it->second;
}

std::optional<Json> MemoryCluster::find(const std::string& path) const {
  std::lock_guard lk(mu_);
  auto ref = parse_path(path);
  if (!ref) return std::nullopt;
  auto it = store_.find(ref->key());
  if (it == store_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> MemoryCluster::select(const Ref& ref, const kube::ListOptions& options) const {
  std::vector<Json> out;
  const std::string prefix = ref.collection() + "/" + (ref.ns.empty() ? "" : ref.ns + "/");
  for (auto it = store_.lower_bound(prefix); it != store_.end() && it->first.starts_with(prefix); ++it) {
    if (!selected(it->second, options)) continue;
    out.push_back(it->second);
    if (options.reduce) options.reduce(out.back());
    if (!out.back().is_object()) out.pop_back();  // reduced to nothing: not listed
  }
  return out;
}

std::vector<Json> MemoryCluster::objects(const std::string& collection, const std::string& selector) const {
  std::lock_guard lk(mu_);
  auto ref = parse_path(collection);
  if (!ref) return {};
  kube::ListOptions o;
  o.label_selector = selector;
  return select(*ref, o);
}

Result<std::vector<Json>> MemoryCluster::list_all(const std::string& path, const kube::ListOptions& options) {
  if (auto h = hold_if_silent("list", path); !h) return h.error();
  std::lock_guard lk(mu_);
  if (auto a = admit("list", path, nullptr); !a) return a.error();
  auto ref = parse_path(path);
  if (!ref)
    return status_error("GET", path, 404, "NotFound", "the server could not find the requested resource");
  if (!options.label_selector.empty() && !manager::LabelSelector::parse(options.label_selector)) {
    return status_error("GET", path, 400, "BadRequest",
                        "unable to parse requirement: " + options.label_selector);
  }
  return select(*ref, options);
}

Result<std::vector<Json>> MemoryCluster::list_identities(const std::string& path,
                                                         const kube::ListOptions& options) {
  auto all = list_all(path, options);
  if (!all) return all;
  for (auto& o : *all) o = identity(o);
  return all;
}

// Stores `object` at `ref` (mu_ held): server-set fields on create, resourceVersion bumped, a change
// recorded.
Result<Json> MemoryCluster::write_object(const Ref& ref, Json object, bool create) {
  const std::string key = ref.key();
  auto it = store_.find(key);
  Json before = it == store_.end() ? Json() : it->second;
  auto& meta = object["metadata"];
  if (create) {
    meta["uid"] = fmt::format("00000000-0000-4000-8000-{:012d}", ++uids_);
    meta["creationTimestamp"] = now_rfc3339();
    if (ref.resource == "pods") {
      if (!object["spec"].contains("terminationGracePeriodSeconds"))
        object["spec"]["terminationGracePeriodSeconds"] = 30;
      if (!object.contains("status") || !object["status"].contains("phase"))
        object["status"]["phase"] = "Pending";
    }
    meta["generation"] = 1;
  } else if (ref.sub.empty() && object.contains("spec") && before.contains("spec") &&
             object["spec"] != before["spec"]) {
    meta["generation"] = number_or(before, {"metadata", "generation"}, 1) + 1;
  }
  object["kind"] = kinds().count(ref.resource) > 0 ? kinds().at(ref.resource) : object.value("kind", "");
  object["apiVersion"] = ref.api_version();
  meta["resourceVersion"] = std::to_string(++rv_);
  store_[key] = object;
  record(create ? "ADDED" : "MODIFIED", key, object, before);
  return object;
}

Result<Json> MemoryCluster::create(const std::string& path, const Json& body) {
  if (auto h = hold_if_silent("create", path); !h) return h.error();
  std::lock_guard lk(mu_);
  bool lost = false;
  if (auto a = admit("create", path, &lost, &body); !a) return a.error();
  auto ref = parse_path(path);
  if (!ref || !ref->name.empty() || !body.is_object())
    return status_error("POST", path, 400, "BadRequest", "not a collection or not an object");
  if (ref->resource == "selfsubjectaccessreviews") {
    Json review = body;
    const Json attrs = body.value("spec", Json::object()).value("resourceAttributes", Json::object());
    const std::string what = attrs.value("verb", "") + " " + attrs.value("resource", "");
    review["status"] = {{"allowed", denied_.count(what) == 0}};
    return review;
  }
  Json object = body;
  std::string name = kube::name(object);
  if (name.empty()) {
    const std::string gen = kube::string_at(object, {"metadata", "generateName"});
    if (gen.empty()) return status_error("POST", path, 422, "Invalid", "name or generateName is required");
    name = gen + fmt::format("{:05x}", (uids_ * 7919 + rv_) & 0xfffff);
    object["metadata"]["name"] = name;
  }
  Ref at = *ref;
  at.name = name;
  if (!cluster_scoped(at.resource)) object["metadata"]["namespace"] = at.ns;
  if (store_.count(at.key()) > 0) {
    return status_error("POST", path, 409, "AlreadyExists", at.resource + " \"" + name + "\" already exists",
                        {{"name", name}, {"kind", at.resource}});
  }
  auto r = write_object(at, std::move(object), true);
  if (lost) return kube::transport_error("POST", path, "memory://cluster", "timed out");
  return r;
}

Result<Json> MemoryCluster::patch(const std::string& path, kube::PatchType type, const Json& body) {
  if (auto h = hold_if_silent("patch", path); !h) return h.error();
  std::lock_guard lk(mu_);
  bool lost = false;
  if (auto a = admit("patch", path, &lost, &body); !a) return a.error();
  auto ref = parse_path(path);
  if (!ref || ref->name.empty()) return status_error("PATCH", path, 405, "MethodNotAllowed", "not an object");
  auto it = store_.find(ref->key());
  if (it == store_.end()) return not_found("patch", path, *ref);
  const Json& current = it->second;
  const std::string want_rv = kube::string_at(body, {"metadata", "resourceVersion"});
  if (!want_rv.empty() && want_rv != kube::resource_version(current)) return conflict("patch", path, *ref);
  Json patched;
  auto applied = apply_patch(current, type, body);
  if (!applied) return status_error("PATCH", path, 422, "Invalid", applied.error().message);
  patched = std::move(*applied);
  if (ref->sub == "status") {
    Json only_status = current;
    only_status["status"] = patched.value("status", Json::object());
    patched = std::move(only_status);
  }
  patched["metadata"]["resourceVersion"] = kube::resource_version(current);
  Ref at = *ref;
  auto r = write_object(at, std::move(patched), false);
  if (lost) return kube::transport_error("PATCH", path, "memory://cluster", "timed out");
  return r;
}

// Deletes the object at `ref` (mu_ held), gracefully for a pod running on a node.
Result<Json> MemoryCluster::delete_locked(const Ref& ref, const kube::DeleteOptions& options) {
  const std::string key = ref.key();
  auto it = store_.find(key);
  if (it == store_.end()) return Error("absent", 404);
  Json obj = it->second;
  if (options.uid && *options.uid != kube::uid(obj)) return Error("uid precondition", 409);
  if (options.resource_version && *options.resource_version != kube::resource_version(obj))
    return Error("resourceVersion precondition", 409);
  if (ref.resource == "pods") {
    int64_t grace =
        options.grace_period_seconds.value_or(number_or(obj, {"spec", "terminationGracePeriodSeconds"}, 30));
    if (kube::pod_node_name(obj).empty() || kube::pod_finished(obj)) grace = 0;
    if (grace > 0) {
      const int64_t current = number_or(obj, {"metadata", "deletionGracePeriodSeconds"}, INT64_MAX);
      if (kube::terminating(obj) && grace >= current) return obj;
      if (!kube::terminating(obj)) obj["metadata"]["deletionTimestamp"] = now_rfc3339();
      obj["metadata"]["deletionGracePeriodSeconds"] = grace;
      return write_object(ref, std::move(obj), false);
    }
  }
  if (ref.resource == "pods") {
    // Even a pod deleted at once is first updated with its deletionTimestamp (a MODIFIED event), as the
    // API server's graceful-deletion path does with a grace period of zero.
    if (!kube::terminating(obj)) obj["metadata"]["deletionTimestamp"] = now_rfc3339();
    obj["metadata"]["deletionGracePeriodSeconds"] = 0;
    auto updated = write_object(ref, std::move(obj), false);
    obj = std::move(*updated);
    it = store_.find(key);
  }
  store_.erase(it);
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  record("DELETED", key, obj, obj);
  return obj;
}

Result<Json> MemoryCluster::remove(const std::string& path, const kube::DeleteOptions& options) {
  if (auto h = hold_if_silent("delete", path); !h) return h.error();
  std::lock_guard lk(mu_);
  bool lost = false;
  if (auto a = admit("delete", path, &lost); !a) return a.error();
  auto ref = parse_path(path);
  if (!ref || ref->name.empty())
    return status_error("DELETE", path, 405, "MethodNotAllowed", "not an object");
  auto r = delete_locked(*ref, options);
  if (!r && r.error().http_status == 404) return not_found("delete", path, *ref);
  if (!r && r.error().http_status == 409) {
    return status_error("DELETE", path, 409, "Conflict",
                        "Precondition failed: " + r.error().message + " does not match",
                        {{"name", ref->name}, {"kind", ref->resource}});
  }
  if (lost) return kube::transport_error("DELETE", path, "memory://cluster", "timed out");
  return r;
}

Status MemoryCluster::evict(const std::string& ns, const std::string& name,
                            const kube::DeleteOptions& options) {
  const std::string path = kube::paths::pod(ns, name) + "/eviction";
  if (auto h = hold_if_silent("evict", path); !h) return h;
  std::lock_guard lk(mu_);
  bool lost = false;
  if (auto a = admit("evict", path, &lost); !a) return a.error();
  auto ref = parse_path(kube::paths::pod(ns, name));
  if (!ref)
    return status_error("POST", path, 404, "NotFound", "the server could not find the requested resource");
  if (auto e = evict_locked(*ref, options); !e)
    return e.error().http_status == 404 ? not_found("create", path, *ref) : e;
  if (lost) return kube::transport_error("POST", path, "memory://cluster", "timed out");
  return ok_status();
}

namespace {

// Does a policy/v1 budget's selector take this pod? An absent selector takes none, an empty one every pod of
// the namespace (policy/v1beta1 took none with an empty one). matchLabels only: what the tests' budgets use.
bool budget_selects(const Json& pdb, const Json* pod_labels) {
  const Json* sel = kube::find(pdb, {"spec", "selector"});
  if (sel == nullptr || !sel->is_object()) return false;
  const Json* match = kube::find(*sel, {"matchLabels"});
  if (match == nullptr || !match->is_object()) return true;
  bool all = true;
  for (const auto& [k, v] : match->items()) {
    all = all && pod_labels != nullptr && pod_labels->contains(k) && (*pod_labels)[k] == v;
  }
  return all;
}

}  // namespace

// policy/v1 eviction as the current API server does it (mu_ held).
Status MemoryCluster::evict_locked(const Ref& ref, const kube::DeleteOptions& options) {
  const std::string path = kube::paths::pod(ref.ns, ref.name) + "/eviction";
  auto it = store_.find(ref.key());
  if (it == store_.end()) return Error("absent", 404);
  const Json pod = it->second;
  const std::string phase = kube::pod_phase(pod);
  const bool ignore_budgets = phase == "Pending" || kube::pod_finished(pod) || kube::terminating(pod);
  std::vector<Json> budgets;
  if (!ignore_budgets) {
    const Json* pod_labels = kube::find(pod, {"metadata", "labels"});
    const std::string prefix = "policy/poddisruptionbudgets/" + ref.ns + "/";
    for (auto b = store_.lower_bound(prefix); b != store_.end() && b->first.starts_with(prefix); ++b) {
      if (budget_selects(b->second, pod_labels)) budgets.push_back(b->second);
    }
  }
  if (budgets.size() > 1) {
    return status_error(
        "POST", path, 500, "InternalError",
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
        "support.");
  }
  if (budgets.size() == 1) {
    const Json& pdb = budgets.front();
    int64_t expected = 0;
    int64_t healthy = 0;
    for (const auto& [key, p] : store_) {
      if (!key.starts_with("/pods/" + ref.ns + "/")) continue;
      if (!budget_selects(pdb, kube::find(p, {"metadata", "labels"})) || kube::terminating(p)) continue;
      ++expected;
      if (kube::pod_ready(p)) ++healthy;
    }
    const int64_t desired = pdb["spec"].contains("minAvailable")
                                ? number_or(pdb, {"spec", "minAvailable"}, expected)
                                : expected - number_or(pdb, {"spec", "maxUnavailable"}, 0);
    // A running pod that is not Ready: `AlwaysAllow` evicts it whatever the budget; the default
    // `IfHealthyBudget` when the budget is met without it (it is not one of the healthy pods).
    const bool unhealthy = !kube::pod_ready(pod);
    const bool always = kube::string_at(pdb, {"spec", "unhealthyPodEvictionPolicy"}) == "AlwaysAllow";
    const bool allowed =
        (unhealthy && (always || (healthy >= desired && desired > 0))) || healthy - desired > 0;
    if (!allowed) {
      const Json details = {
          {"causes",
           Json::array({{{"reason", "DisruptionBudget"},
                         {"message", fmt::format("The disruption budget {} needs {} healthy pods and "
                                                 "has {} currently",
                                                 kube::name(pdb), desired, healthy)}}})}};
      return status_error("POST", path, 429, "TooManyRequests",
                          "Cannot evict pod as it would violate the pod's disruption budget.", details);
    }
  }
  // The pod is told why it goes: the DisruptionTarget condition, set before the deletion (a running pod on a
  // node keeps it while it terminates).
  if (!kube::terminating(pod) && !kube::pod_finished(pod)) {
    Json marked = pod;
    Json& conditions = marked["status"]["conditions"];
    if (!conditions.is_array()) conditions = Json::array();
    Json kept = Json::array();
    for (const auto& c : conditions) {
      if (c.value("type", "") != "DisruptionTarget") kept.push_back(c);
    }
    conditions = std::move(kept);
    conditions.push_back({{"type", "DisruptionTarget"},
                          {"status", "True"},
                          {"reason", "EvictionByEvictionAPI"},
                          {"message", "Eviction API: evicting"},
                          {"lastTransitionTime", now_rfc3339()}});
    if (auto w = write_object(ref, std::move(marked), false); !w) return w.error();
  }
  auto r = delete_locked(ref, options);
  if (!r && r.error().http_status == 409) return conflict("create", path, ref);
  if (!r) return r.error();
  return ok_status();
}

Status MemoryCluster::create_event(const Json& involved_object, const std::string& reason,
                                   const std::string& message, const std::string& type) {
  auto ev = kube::event_object(involved_object, reason, message, type, "driver-manager", now_rfc3339());
  if (!ev) return ev.error();
  const Json& ref = (*ev)["involvedObject"];
  auto r = create("/api/v1/namespaces/" + kube::string_at(*ev, {"metadata", "namespace"}) + "/events", *ev);
  if (!r) {
    return r.error().wrap("cannot record event " + reason + " on " + ref.value("kind", "") + " " +
                          ref.value("name", ""));
  }
  return ok_status();
}

Json MemoryCluster::apply(Json object) {
  std::lock_guard lk(mu_);
  const std::string resource = resource_of_kind(object.value("kind", ""));
  Ref r;
  const std::string api_version = object.value("apiVersion", "v1");
  const auto slash = api_version.find('/');
  r.group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  r.version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  r.resource = resource;
  r.name = kube::name(object);
  r.ns = cluster_scoped(resource) ? "" : kube::namespace_of(object);
  if (!cluster_scoped(resource) && r.ns.empty()) {
    r.ns = "default";
    object["metadata"]["namespace"] = "default";
  }
  auto it = store_.find(r.key());
  if (it == store_.end()) return *write_object(r, std::move(object), true);
  for (const char* k : {"uid", "creationTimestamp", "generation"}) {
    if (it->second["metadata"].contains(k)) object["metadata"][k] = it->second["metadata"][k];
  }
  return *write_object(r, std::move(object), false);
}

}  // namespace dm::test
