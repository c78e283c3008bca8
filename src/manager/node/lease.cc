#include "manager/node/lease.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <ctime>
#include <iomanip>
#include <sstream>

#include "common/duration_text.h"
#include "common/log.h"
#include "kube/retry.h"
#include "kube/stopped_by.h"

namespace dm::manager {

using Json = nlohmann::json;
using SysClock = std::chrono::system_clock;

namespace {

// The latest renew time and the longest duration a lease can have: a run renews it every few seconds, for
// a minute. Anything beyond is not a lease of ours (and would overflow the clock's nanoseconds, which end in
// 2262).
constexpr std::time_t kLatestRenewTime = 7258118400;  // 2200-01-01T00:00:00Z
constexpr int64_t kLongestLeaseSeconds = 86400;

std::optional<SysClock::time_point> parse_rfc3339(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return std::nullopt;
  const std::time_t t = timegm(&tm);
  if (t < 0 || t > kLatestRenewTime) return std::nullopt;
  return SysClock::from_time_t(t);
}

std::string age(SysClock::time_point now, SysClock::time_point t) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(now - t).count();
  return std::to_string(s) + "s";
}

// "/metadata/annotations/<key>" as a JSON pointer ("/" and "~" escaped).
std::string annotation_pointer(std::string_view key) {
  std::string out = "/metadata/annotations/";
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string LeaseRecord::to_string() const {
  return Json{{"holder", holder}, {"renewTime", rfc3339(renewed)}, {"leaseDurationSeconds", duration.count()}}
      .dump();
}

std::optional<LeaseRecord> lease_of(const Json& node) {
  if (!node.contains("metadata") || !node["metadata"].contains("annotations")) return std::nullopt;
  const Json& ann = node["metadata"]["annotations"];
  auto it = ann.find(std::string(kLeaseAnnotation));
  if (it == ann.end() || !it->is_string()) return std::nullopt;
  const Json v = Json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (!v.is_object() || !v.contains("holder") || !v["holder"].is_string() || !v.contains("renewTime") ||
      !v["renewTime"].is_string() || !v.contains("leaseDurationSeconds") ||
      !v["leaseDurationSeconds"].is_number_integer()) {
    return std::nullopt;
  }
  auto renewed = parse_rfc3339(v["renewTime"].get<std::string>());
  const auto seconds = v["leaseDurationSeconds"].get<int64_t>();
  if (!renewed || seconds < 0 || seconds > kLongestLeaseSeconds) return std::nullopt;
  return LeaseRecord{v["holder"].get<std::string>(), *renewed, std::chrono::seconds(seconds)};
}

std::string lease_holder_identity(const std::string& pod_ref, const std::string& hostname) {
  if (!pod_ref.empty()) return "pod " + pod_ref;
  std::string host = hostname;
  if (host.empty()) {
    char buf[256] = {};
    // HOSTNAME is a shell variable, rarely exported outside a container: ask the kernel.
    if (gethostname(buf, sizeof buf - 1) == 0) host = buf;
  }
  return fmt::format("process {} on {}", getpid(), host.empty() ? std::string("?") : host);
}

NodeLease::NodeLease(kube::Api& client, const Clock& clock, std::string node, std::string holder,
                     LeaseOptions options)
    : client_(client), clock_(clock), node_(std::move(node)), holder_(std::move(holder)), options_(options) {}

NodeLease::~NodeLease() {
  stop_renewing();
}

Result<NodeLease::Attempt> NodeLease::try_take(const Json* seen, Take take) {
  // A lease record on the copy is decided on a fresh read only (who holds it, since when).
  auto node =
      seen != nullptr && !lease_of(*seen) ? Result<Json>(*seen) : client_.get(kube::paths::node(node_));
  if (!node) return node.error().wrap("failed to get node " + node_);
  const auto current = lease_of(*node);
  const auto now = clock_.wall_now();
  if (current && current->holder != holder_ && !current->expired(now)) return Attempt{current, {}};
  if (current && current->holder == holder_) {
    spdlog::info("Taking over the lease on node {} of an earlier attempt of {} (renewed {} ago)", node_,
                 holder_, age(now, current->renewed));
  } else if (current) {
    spdlog::info("The lease on node {} of {} expired {} ago (its run crashed or was killed); taking it over",
                 node_, current->holder, age(now, current->renewed + current->duration));
  }
  if (take == Take::kLook) return Attempt{std::nullopt, std::move(*node)};
  const LeaseRecord mine{holder_, now, options_.duration};
  const Json body = {{"metadata",
                      {{"resourceVersion", (*node)["metadata"].value("resourceVersion", "")},
                       {"annotations", {{std::string(kLeaseAnnotation), mine.to_string()}}}}}};
  auto r = client_.patch(kube::paths::node(node_), kube::PatchType::kMerge, body);
  if (!r) {
    // The node changed since the GET (maybe another run took the lease): look again.
    if (r.error().conflict()) return Attempt{std::nullopt, {}, true};
    if (r.error().http_status == 0 || r.error().http_status >= 500) {
      const std::lock_guard<std::mutex> lock(mu_);
      maybe_taken_ = true;
    }
    return r.error().wrap("failed to take the lease on node " + node_);
  }
  return Attempt{std::nullopt, std::move(*r)};
}

Result<Json> NodeLease::acquire(const CancelToken& cancel, const Json* seen) {
  auto taken = wait(cancel, seen, Take::kWrite);
  if (!taken) return taken;
  started();
  return taken;
}

Result<Json> NodeLease::wait_until_free(const CancelToken& cancel, const Json* seen) {
  return wait(cancel, seen, Take::kLook);
}

NodeFold NodeLease::take_fold() {
  return [this](const Json& node, FoldedPatch& part) {
    const auto current = lease_of(node);
    const auto now = clock_.wall_now();
    if (current && current->holder != holder_ && !current->expired(now)) {
      part.refusal = Error(fmt::format(
          "node {} was taken by another run of driver-manager ({}) while this run prepared its first write: "
          "this run changed nothing; the next attempt waits for that run to end",
          node_, current->holder));
      return;
    }
    const LeaseRecord mine{holder_, now, options_.duration};
    part.body["metadata"]["annotations"][std::string(kLeaseAnnotation)] = mine.to_string();
  };
}

void NodeLease::first_write_done(WriteOutcome outcome) {
  if (outcome == WriteOutcome::kApplied) {
    started();
    return;
  }
  if (outcome == WriteOutcome::kMaybeApplied) {
    const std::lock_guard<std::mutex> lock(mu_);
    maybe_taken_ = true;
  }
}

void NodeLease::started() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
    stop_ = false;
    renewing_ = CancelToken();
  }
  spdlog::debug("Holding the lease on node {} as {}", node_, holder_);
  renewer_ = std::thread([this] { renew_loop(); });
}

Result<Json> NodeLease::wait(const CancelToken& cancel, const Json* seen, Take take) {
  const Deadline deadline = Deadline::after(clock_, options_.wait_at_most);
  TimePoint next_log = clock_.now();
  Json taken;
  int conflicts = 0;
  for (;;) {
    auto t = try_take(seen, take);
    seen = nullptr;
    if (!t) return t.error();
    // Node status updates change the resourceVersion all the time: a conflict alone is no other holder.
    if (t->conflict && ++conflicts < 20) continue;
    if (t->conflict) t->other = LeaseRecord{"(the node keeps changing)", clock_.wall_now(), {}};
    if (!t->other) {
      taken = std::move(t->node);
      break;
    }
    const LeaseRecord& other = *t->other;
    if (deadline.passed(clock_)) {
      return Error(fmt::format(
          "node {} is being prepared by another run of driver-manager ({}, lease renewed {} ago): not "
          "starting a second one. It ends by itself; if that run is gone, its lease lapses {}s after its "
          "last "
          "renewal",
          node_, other.holder, age(clock_.wall_now(), other.renewed), other.duration.count()));
    }
    if (clock_.now() >= next_log) {
      spdlog::info(
          "Waiting for the run of driver-manager that holds node {} to finish ({}, lease renewed {} ago)",
          node_, other.holder, age(clock_.wall_now(), other.renewed));
      next_log = clock_.now() + options_.log_every;
    }
    if (!clock_.sleep_for(std::chrono::seconds(2), cancel)) return Error("terminated by SIGTERM");
    conflicts = 0;
  }
  return taken;
}

Result<bool> NodeLease::renew_once(const CancelToken& stop, Look look) {
  kube::StoppedBy client(client_, stop);
  const std::string path = kube::paths::node(node_);
  const std::string mine = LeaseRecord{holder_, clock_.wall_now(), options_.duration}.to_string();
  const auto rider = rider_.take ? rider_.take() : std::nullopt;
  Result<Json> r = Error("not sent");
  if (look == Look::kOwnLast && !last_written_.empty()) {
    // Guarded by the record this run wrote last: still there, nobody took the lease since, whatever else
    // changed on the node (a heartbeat is no conflict), and no read is needed.
    const std::string lease = annotation_pointer(kLeaseAnnotation);
    Json ops = Json::array({{{"op", "test"}, {"path", lease}, {"value", last_written_}},
                            {{"op", "replace"}, {"path", lease}, {"value", mine}}});
    if (rider)
      ops.push_back({{"op", "add"}, {"path", annotation_pointer(rider->first)}, {"value", rider->second}});
    r = client.patch(path, kube::PatchType::kJsonPatch, ops);
  } else {
    auto node = client.get(path);
    if (!node) return node.error();
    const auto current = lease_of(*node);
    if (!current || current->holder != holder_) {
      spdlog::error("Lost the lease on node {}: it is now held by {}", node_,
                    current ? current->holder : std::string("nobody"));
      return false;
    }
    Json body = {{"metadata",
                  {{"resourceVersion", (*node)["metadata"].value("resourceVersion", "")},
                   {"annotations", {{std::string(kLeaseAnnotation), mine}}}}}};
    if (rider) body["metadata"]["annotations"][rider->first] = rider->second;
    r = client.patch(path, kube::PatchType::kMerge, body);
  }
  if (rider && rider_.done) rider_.done(r.ok());
  last_written_ = r ? mine : std::string();
  if (!r) return r.error();
  return true;
}

// A renewal the API server does not answer is tried again until the lease would lapse (its requests'
// deadline). Past that the run goes on - stopping it midway would leave the node half prepared - and keeps
// renewing: the lease is taken back if it is still ours, and lost if another run took it meanwhile.
void NodeLease::renew_loop() {
  TimePoint renewed = clock_.now();  // the lease was taken just now
  bool lapsed = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    clock_.wait_for(lock, cv_, options_.renew_every, [&] { return stop_; });
    if (stop_) break;
    const CancelToken stop = renewing_;
    lock.unlock();
    const TimePoint lapses = renewed + options_.duration;
    Result<bool> s = false;
    {
      const kube::RequestDeadline until_it_lapses(Deadline::after(clock_, lapses - clock_.now()));
      s = renew_once(stop, Look::kOwnLast);
      // The record is not the one this run wrote last (or the node changed under a read): read it again.
      if (!s && (s.error().conflict() || s.error().http_status == 422)) s = renew_once(stop, Look::kRead);
    }
    lock.lock();
    if (s && *s) {
      if (lapsed) spdlog::info("Renewed the lease on node {} again: this run holds it", node_);
      renewed = clock_.now();
      lapsed = false;
    } else if (!s && s.error().cancelled()) {
      // stop_renewing() stopped the request: the lease is being released.
      spdlog::debug("Renewing the lease on node {} was cancelled", node_);
    } else if (!s && !lapsed && clock_.now() >= lapses) {
      lapsed = true;
      spdlog::error(
          "The lease on node {} has lapsed: not renewed for {} ({}). Another run of driver-manager may take "
          "the node now; this run goes on, and keeps renewing the lease: it takes it back if it is still "
          "its own, and says so if another run took it",
          node_, format_duration(clock_.now() - renewed, DurationStyle::kWholeSeconds), s.error().message);
    } else if (!s && !lapsed) {
      spdlog::warn("Failed to renew the lease on node {} (will retry until it lapses in {}): {}", node_,
                   format_duration(lapses - clock_.now(), DurationStyle::kWholeSeconds), s.error().message);
    } else if (!s) {
      spdlog::debug("Renewing the lapsed lease on node {} failed: {}", node_, s.error().message);
    } else {
      lost_ = true;
      break;
    }
  }
}

void NodeLease::stop_renewing() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    renewing_.cancel();
  }
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

bool NodeLease::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_ && !lost_;
}

NodeFold NodeLease::release_fold(std::vector<std::string> also_remove) {
  stop_renewing();
  return [this, also_remove = std::move(also_remove)](const Json& node, FoldedPatch& patch) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (!held_ && !maybe_taken_) return;
    }
    const auto current = lease_of(node);
    if (!current || current->holder != holder_) return;
    Json& annotations = patch.body["metadata"]["annotations"];
    annotations[std::string(kLeaseAnnotation)] = nullptr;
    for (const auto& key : also_remove) annotations[key] = nullptr;
  };
}

void NodeLease::folded_release_done(bool applied) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (applied) {
    held_ = false;
    maybe_taken_ = false;
    return;
  }
  if (!held_ || lost_ || renewer_.joinable()) return;
  stop_ = false;
  renewing_ = CancelToken();
  renewer_ = std::thread([this] { renew_loop(); });
}

Status NodeLease::release(const CancelToken& stop, const std::vector<std::string>& also_remove) {
  stop_renewing();
  kube::StoppedBy client(client_, stop);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!held_ && !maybe_taken_) return ok_status();
    held_ = false;
    maybe_taken_ = false;
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto node = client.get(kube::paths::node(node_));
    if (!node) return node.error().wrap("failed to release the lease on node " + node_);
    const auto current = lease_of(*node);
    if (!current || current->holder != holder_) return ok_status();
    Json annotations = {{std::string(kLeaseAnnotation), nullptr}};
    for (const auto& key : also_remove) annotations[key] = nullptr;
    const Json body = {{"metadata",
                        {{"resourceVersion", (*node)["metadata"].value("resourceVersion", "")},
                         {"annotations", annotations}}}};
    auto r = client.patch(kube::paths::node(node_), kube::PatchType::kMerge, body);
    if (r) return ok_status();
    if (!r.error().conflict()) return r.error().wrap("failed to release the lease on node " + node_);
  }
  return Error("failed to release the lease on node " + node_ + ": the node kept changing");
}

}  // namespace dm::manager
