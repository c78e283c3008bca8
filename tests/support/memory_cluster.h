// An in-memory Kubernetes API for the fast test tier (label `unit`): kube::Api over a map of JSON objects,
// as a virtual file system stands in for a disk. What the flow relies on is modelled after the current API
// server (policy/v1, resource.k8s.io/v1), and tests/unit/api_contract_test.cc runs the same cases against
// this and the real server (tests/integration/api_contract_real_test.cc) so the two cannot drift apart:
//
// * objects keyed by group, resource, namespace and name (the version is not part of the key: policy/v1 and
//   policy/v1beta1 budgets are the same objects); uid, resourceVersion (one counter for everything),
//   creationTimestamp, generateName filled in on create; 404 NotFound, 409 AlreadyExists;
// * writes that name a resourceVersion (in a patch's or an update's metadata, in delete preconditions) fail
//   409 Conflict when it is stale; merge patch (RFC 7386), strategic merge patch (lists merged by the keys
//   the flow's objects use: conditions and addresses by type, container statuses by name, else replaced);
//   the status subresource changes only the status;
// * label selectors (manager/rules/label_selector) and equality field selectors on any dotted field;
// * a pod deleted with a grace period (its own, default 30 s) on a node gets deletionTimestamp and
//   deletionGracePeriodSeconds and stays until something (the kubelet stand-in, node-sim's Simulator run
//   against this cluster) deletes it with grace 0; a pod on no node, a finished pod, or grace 0 goes at once
//   (after one update that sets its deletionTimestamp, as the real server's deletion path makes);
// * eviction (policy/v1): the pod's budget (one at most, else 500; an empty selector takes every pod of the
//   namespace) must allow a disruption: a budget's allowance is computed as its controller would (healthy =
//   Ready and not terminating); else 429 TooManyRequests with the cause DisruptionBudget "The disruption
//   budget <name> needs <n> healthy pods and has <m> currently". A running pod that is not Ready goes when
//   the budget is met without it, or always under `unhealthyPodEvictionPolicy: AlwaysAllow`. Pending,
//   finished and terminating pods are evicted without looking at budgets. An evicted pod gets the
//   DisruptionTarget condition (reason EvictionByEvictionAPI) before its deletion;
// * list_watch: a list, then every change after it, with selector transitions (an object that stops
//   matching is DELETED for the watcher, one that starts matching ADDED); a refused watch (a 403 fault)
//   ends it after the list, as the real server does;
// * SelfSubjectAccessReviews are answered allowed unless deny_access() said otherwise;
// * faults: a request fails with a chosen status, or times out (optionally after it was applied), or is
//   held without an answer; the server can be "down" (every request fails as unreachable) or "silent"
//   (every request held, as on a link gone silent: set_silent).
// A DaemonSet stand-in (start_daemonsets()) keeps one pod of each DaemonSet on each node its node selector
// and required node affinity match (kube/node_affinity; its pods pinned to the node by matchFields, as the
// real controller's are): it starts one where no untolerated NoSchedule/NoExecute taint keeps it off, and
// deletes it when they no longer match or an untolerated NoExecute taint arrives (a NoSchedule taint leaves a
// running pod alone, as in Kubernetes).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "kube/api.h"

namespace dm::test {

// A request the cluster answers with a failure instead.
struct Fault {
  std::string verb = {};       // get, list, watch, create, patch, delete, evict; "" = every verb
  std::string path_part = {};  // the request path contains it; "" = every path
  std::string body_part = {};  // the request body (as JSON text) contains it; "" = every body
  int status = 500;            // the answer's HTTP status; 0 = no answer (a timeout)
  int times = 1;               // how many matching requests fail; -1 = all of them until clear_faults()
  bool applied = false;        // the request took effect before its answer was lost (status 0 only)
  bool then_silent = false;    // once it has answered, the link goes silent (set_silent(true))
  bool hold = false;           // no answer at all: held as on a silent link (set_silent); body_part unread
  Duration delay{};            // the answer comes this late (on use_clock()'s clock); body_part unread
};

class MemoryCluster final : public kube::Api {
 public:
  MemoryCluster();
  ~MemoryCluster() override;
  MemoryCluster(const MemoryCluster&) = delete;
  MemoryCluster& operator=(const MemoryCluster&) = delete;

  // kube::Api.
  Result<nlohmann::json> get(const std::string& path) override;
  Result<std::vector<nlohmann::json>> list_all(const std::string& path,
                                               const kube::ListOptions& options = {}) override;
  Result<std::vector<nlohmann::json>> list_identities(const std::string& path,
                                                      const kube::ListOptions& options = {}) override;
  Result<nlohmann::json> create(const std::string& path, const nlohmann::json& body) override;
  Result<nlohmann::json> patch(const std::string& path, kube::PatchType type,
                               const nlohmann::json& body) override;
  Result<nlohmann::json> remove(const std::string& path, const kube::DeleteOptions& options = {}) override;
  Status evict(const std::string& ns, const std::string& name,
               const kube::DeleteOptions& options = {}) override;
  Status create_event(const nlohmann::json& involved_object, const std::string& reason,
                      const std::string& message, const std::string& type = "Normal") override;
  Status list_watch(const std::string& path, const kube::ListOptions& options,
                    const kube::WatchHandlers& handlers, Deadline deadline = {}) override;

  // What an admin does with kubectl: never faulted, never cancelled. `apply` creates the object or replaces
  // it whole (kind and apiVersion decide where it goes); returns it as stored.
  nlohmann::json apply(nlohmann::json object);
  // The stored object at an API path, if any.
  [[nodiscard]] std::optional<nlohmann::json> find(const std::string& path) const;
  // The objects of a collection path (e.g. paths::pods(ns)), optionally with a label selector.
  [[nodiscard]] std::vector<nlohmann::json> objects(const std::string& collection,
                                                    const std::string& selector = {}) const;

  void fail(Fault fault);
  void clear_faults();
  void set_down(bool down);  // every request fails as when the API server cannot be reached
  // While silent, no request gets an answer (a link gone silent, a server that holds every request): each one
  // waits until the token of the view it was sent through fires (kube::StoppedBy), or until kube::Client
  // would give up on it - the deadline of what it serves (kube::RequestDeadline, a watch's own), else the
  // client's 5 minutes - and then fails unanswered ("gave up at the deadline"). Waits on use_clock()'s clock.
  void set_silent(bool silent) { silent_ = silent; }
  // SelfSubjectAccessReviews for `verb` on `resource` (e.g. "patch", "nodes") are answered not allowed.
  void deny_access(const std::string& verb, const std::string& resource);
  // "<VERB> <path>" of every request received (faulted ones included), in order.
  [[nodiscard]] std::vector<std::string> requests() const;

  // The DaemonSet stand-in (see above), on a thread of its own until the cluster is destroyed.
  void start_daemonsets();
  // Watches measure their deadline and wait on `clock` (which must outlive the cluster), not the real clock.
  void use_clock(const Clock& clock) { clock_ = &clock; }
  // The cluster as a stand-in controller sees it (node-sim's kubelet run in-process): never faulted, not
  // stopped by a StoppedBy view's token, not in requests(). Must not outlive the cluster.
  std::unique_ptr<kube::Api> controller_client();
  // Whether this thread makes its requests as a stand-in controller.
  static bool& controller_flag() { return t_controller; }

  // An API path taken apart: /api/v1/namespaces/ns/pods/name/status, /apis/policy/v1/poddisruptionbudgets...
  struct Ref {
    std::string group;  // "" = core
    std::string version;
    std::string resource;
    std::string ns;    // "" = cluster-scoped or every namespace
    std::string name;  // "" = the collection
    std::string sub;   // status, eviction
    [[nodiscard]] std::string collection() const { return group + "/" + resource; }
    [[nodiscard]] std::string key() const { return collection() + "/" + ns + "/" + name; }
    [[nodiscard]] std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  };
  static std::optional<Ref> parse_path(const std::string& path);
  // The object is one the options' label and field selectors select.
  static bool selected(const nlohmann::json& object, const kube::ListOptions& options);

 private:
  struct Change {
    uint64_t rv;
    std::string type;        // ADDED, MODIFIED, DELETED
    std::string collection;  // group/resource
    std::string ns;
    nlohmann::json object;
    nlohmann::json before;  // null for ADDED
  };

  Status admit(const std::string& verb, const std::string& path, bool* applied_then_lost,
               const nlohmann::json* body = nullptr);
  // Before admit(), without the lock: holds the request while the link is silent (set_silent()).
  Status hold_if_silent(const std::string& verb, const std::string& path, Deadline deadline = {});
  Result<nlohmann::json> write_object(const Ref& ref, nlohmann::json object, bool create);
  Result<nlohmann::json> delete_locked(const Ref& ref, const kube::DeleteOptions& options);
  Status evict_locked(const Ref& ref, const kube::DeleteOptions& options);
  void record(const std::string& type, const std::string& key, const nlohmann::json& object,
              const nlohmann::json& before);
  std::vector<nlohmann::json> select(const Ref& ref, const kube::ListOptions& options) const;
  void daemonset_loop();
  void reconcile_daemonsets();

  static thread_local bool t_controller;  // set on the stand-in controllers' thread
  SystemClock system_clock_;
  const Clock* clock_ = &system_clock_;  // use_clock()
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, nlohmann::json> store_;  // key: group/resource/namespace/name
  std::vector<Change> changes_;
  uint64_t rv_ = 1000;
  uint64_t uids_ = 0;
  std::vector<Fault> faults_;
  bool down_ = false;
  std::atomic<bool> silent_{false};
  std::set<std::string> denied_;  // "verb resource"
  std::vector<std::string> requests_;
  std::atomic<bool> stop_{false};
  std::thread daemonsets_;
};

// What a fresh in-memory tier node looks like: the objects every test starts from.
nlohmann::json memory_node(const std::string& name, const std::map<std::string, std::string>& labels = {});

}  // namespace dm::test
