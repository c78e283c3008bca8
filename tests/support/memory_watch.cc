// The in-memory cluster's list+watch and its DaemonSet stand-in (memory_cluster.h).
#include <fmt/format.h>

#include "kube/errors.h"
#include "kube/node_affinity.h"
#include "kube/objects.h"
#include "kube/stopped_by.h"
#include "manager/rules/label_selector.h"
#include "support/memory_cluster.h"

namespace dm::test {

using Json = nlohmann::json;

Status MemoryCluster::list_watch(const std::string& path, const kube::ListOptions& options,
                                 const kube::WatchHandlers& handlers, Deadline deadline) {
  const Clock& clock = *clock_;
  CancelToken cancel;  // the token of the view it was sent through (kube::StoppedBy), else none
  if (const CancelToken* stop = kube::StoppedBy::current(); stop != nullptr && !t_controller) cancel = *stop;
  const std::string what = "watch " + path;
  // The list and where the watch starts (every change after it) under one lock.
  std::vector<Json> listed;
  size_t next = 0;
  const auto ref = parse_path(path);
  if (auto h = hold_if_silent("list", path, deadline); !h) return h.error().wrap(what);
  {
    std::lock_guard lk(mu_);
    if (auto a = admit("list", path, nullptr); !a) return a.error().wrap(what);
    if (!ref) return Error(what + ": not an API path");
    listed = select(*ref, options);
    next = changes_.size();
  }
  if (handlers.on_sync) handlers.on_sync(listed);
  if (handlers.done && handlers.done()) return ok_status();
  // The watch request itself may be refused (a role that may list but not watch), or fail for a while.
  {
    std::lock_guard lk(mu_);
    if (auto a = admit("watch", path, nullptr); !a) {
      if (a.error().http_status == 401 || a.error().http_status == 403 || a.error().cancelled()) return a;
    }
  }
  const auto tick = std::max(handlers.tick, std::chrono::milliseconds(1));
  while (true) {
    // A silent link brings no more events: the stream is as good as gone (what its end brings, a relist,
    // is held in turn).
    if (silent_ && !t_controller) {
      if (auto h = hold_if_silent("watch", path, deadline); !h) return h.error().wrap(what);
    }
    std::vector<kube::WatchEvent> events;
    {
      std::unique_lock lk(mu_);
      clock.wait_for(lk, changed_, tick, [&] { return changes_.size() > next || stop_; });
      for (; next < changes_.size(); ++next) {
        const Change& c = changes_[next];
        if (c.collection != ref->collection() || (!ref->ns.empty() && c.ns != ref->ns)) continue;
        const bool now = c.type != "DELETED" && selected(c.object, options);
        const bool was = c.type != "ADDED" && selected(c.before, options);
        if (!now && !was) continue;
        std::string type = c.type;
        if (now && !was) type = "ADDED";
        if (!now && was) type = "DELETED";
        Json object = c.object;
        if (options.reduce) options.reduce(object);
        events.push_back({type, std::move(object)});
      }
    }
    for (auto& ev : events) {
      if (handlers.on_event) handlers.on_event(ev);
      if (handlers.done && handlers.done()) return ok_status();
    }
    if (handlers.done && handlers.done()) return ok_status();
    if (cancel.cancelled()) return Error::cancellation(what + ": cancelled");
    if (deadline.passed(clock)) return Error(what + ": timed out before the awaited condition was met");
  }
}

namespace {

// This thread's requests are a stand-in controller's while it lives.
struct AsController {
  AsController() : flag(MemoryCluster::controller_flag()), before(flag) { flag = true; }
  ~AsController() { flag = before; }
  AsController(const AsController&) = delete;
  AsController& operator=(const AsController&) = delete;
  bool& flag;
  bool before;
};

// Every call made as a stand-in controller.
class ControllerView final : public kube::Api {
 public:
  explicit ControllerView(MemoryCluster& cluster) : c_(cluster) {}
  Result<Json> get(const std::string& path) override {
    const AsController as;
    return c_.get(path);
  }
  Result<std::vector<Json>> list_all(const std::string& path, const kube::ListOptions& o = {}) override {
    const AsController as;
    return c_.list_all(path, o);
  }
  Result<std::vector<Json>> list_identities(const std::string& path,
                                            const kube::ListOptions& o = {}) override {
    const AsController as;
    return c_.list_identities(path, o);
  }
  Result<Json> create(const std::string& path, const Json& body) override {
    const AsController as;
    return c_.create(path, body);
  }
  Result<Json> patch(const std::string& path, kube::PatchType type, const Json& body) override {
    const AsController as;
    return c_.patch(path, type, body);
  }
  Result<Json> remove(const std::string& path, const kube::DeleteOptions& o = {}) override {
    const AsController as;
    return c_.remove(path, o);
  }
  Status evict(const std::string& ns, const std::string& name, const kube::DeleteOptions& o = {}) override {
    const AsController as;
    return c_.evict(ns, name, o);
  }
  Status create_event(const Json& obj, const std::string& reason, const std::string& message,
                      const std::string& type = "Normal") override {
    const AsController as;
    return c_.create_event(obj, reason, message, type);
  }
  Status list_watch(const std::string& path, const kube::ListOptions& o, const kube::WatchHandlers& h,
                    Deadline deadline = {}) override {
    const AsController as;
    return c_.list_watch(path, o, h, deadline);
  }

 private:
  MemoryCluster& c_;
};

}  // namespace

std::unique_ptr<kube::Api> MemoryCluster::controller_client() {
  return std::make_unique<ControllerView>(*this);
}

void MemoryCluster::start_daemonsets() {
  if (!daemonsets_.joinable()) daemonsets_ = std::thread([this] { daemonset_loop(); });
}

void MemoryCluster::daemonset_loop() {
  t_controller = true;
  size_t seen = 0;
  while (!stop_) {
    {
      std::unique_lock lk(mu_);
      changed_.wait_for(lk, std::chrono::milliseconds(50), [&] { return changes_.size() != seen || stop_; });
      seen = changes_.size();
    }
    if (!stop_) reconcile_daemonsets();
  }
}

namespace {

// As the real controller does to the pods it creates (ReplaceDaemonSetPodNodeNameNodeAffinity): the
// required node affinity is replaced by one term matching the node's name in its matchFields; the terms of
// the template are not on the pod.
void pin_to_node(Json& pod, const std::string& node) {
  const Json field = {{"key", "metadata.name"}, {"operator", "In"}, {"values", Json::array({node})}};
  Json& required = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  required["nodeSelectorTerms"] = Json::array({{{"matchFields", Json::array({field})}}});
}

}  // namespace

// One pass of the DaemonSet controller: a pod for each matching node that has none, the pods of a node that
// no longer matches deleted (gracefully).
void MemoryCluster::reconcile_daemonsets() {
  std::vector<Json> daemonsets = objects("/apis/apps/v1/daemonsets");
  std::vector<Json> nodes = objects("/api/v1/nodes");
  std::vector<Json> pods = objects("/api/v1/pods");
  for (const auto& ds : daemonsets) {
    const Json tmpl = ds["spec"]["template"];
    for (const auto& node : nodes) {
      // The node selector and the required node affinity match, as the scheduler decides it.
      const bool fits = kube::pod_fits_node(tmpl, {kube::name(node), kube::labels(node)});
      // As the real controller: an untolerated NoSchedule taint keeps a new pod off but leaves a running one;
      // an untolerated NoExecute taint, like a node selector that no longer matches, also deletes it.
      bool may_start = fits;
      bool may_stay = fits;
      const auto tolerations = kube::pod_tolerations(tmpl);
      for (const auto& taint : kube::node_taints(node)) {
        if (taint.effect == "PreferNoSchedule" || kube::tolerates(tolerations, taint)) continue;
        may_start = false;
        if (taint.effect == "NoExecute") may_stay = false;
      }
      bool has_live = false;
      for (const auto& p : pods) {
        const auto owner = kube::controller_ref(p);
        if (!owner || owner->uid != kube::uid(ds) || kube::pod_node_name(p) != kube::name(node)) continue;
        if (!may_stay && !kube::terminating(p))
          (void)remove(kube::paths::pod(kube::namespace_of(p), kube::name(p)));
        has_live = has_live || !kube::terminating(p);
      }
      if (!may_start || has_live) continue;
      Json pod = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata", tmpl.value("metadata", Json::object())},
                  {"spec", tmpl["spec"]}};
      pod["metadata"]["generateName"] = kube::name(ds) + "-";
      pod["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"},
                                                         {"kind", "DaemonSet"},
                                                         {"name", kube::name(ds)},
                                                         {"uid", kube::uid(ds)},
                                                         {"controller", true}}});
      pod["spec"]["nodeName"] = kube::name(node);
      pin_to_node(pod, kube::name(node));
      (void)create(kube::paths::pods(kube::namespace_of(ds)), pod);
    }
  }
}

}  // namespace dm::test
