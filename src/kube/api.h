// What driver-manager asks of Kubernetes, as one narrow interface: get, list, watch, create, patch, delete,
// evict, record an Event. The flow (manager/) and node-sim's kubelet see the cluster only through it. What
// stops a request is the view it is sent through (kube::StoppedBy, stopped_by.h).
// kube::Client (client.h) is the real API server over HTTPS; tests/support/memory_cluster is an in-memory
// cluster for the fast tier, kept honest by one contract suite that runs against both
// (tests/unit/api_contract_test.cc, tests/integration/api_contract_real_test.cc). Objects are plain JSON (see
// objects.h for typed views); paths are API paths (client.h, paths).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace dm::kube {

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // 0: no paging
  std::string continue_token;
  std::string resource_version;
  // Server-side timeoutSeconds: for list_watch, how long one watch request lasts before it is renewed from
  // the last resourceVersion (0: a random 5-10 minutes, like client-go).
  int64_t timeout_seconds = 0;
  // Applied to every object as soon as it is parsed (each listed item, each watch event's object), before
  // the caller sees it: a caller drops the fields it never reads, so they never take memory beside the rest.
  // A listed item the reducer turns into a non-object (null) is left out of the list (a caller that keeps
  // items its own way).
  std::function<void(nlohmann::json& object)> reduce;
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::optional<std::string> uid;               // precondition
  std::optional<std::string> resource_version;  // precondition
  std::string propagation_policy;               // "", "Background", "Foreground", "Orphan"
};

enum class PatchType { kStrategicMerge, kMerge, kJsonPatch };

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED (BOOKMARKs are consumed by list_watch itself)
  nlohmann::json object;
};

// Callbacks for list_watch. BOOKMARK events (which carry only a resourceVersion) are tracked internally and
// not passed to on_event. on_sync receives the full current list (first list, and every re-list after a
// 410 Gone); on_event each change after it. `done` is checked after each sync/event and at least every
// `tick`; returning true ends list_watch successfully.
struct WatchHandlers {
  // Both may move from what they are handed (it is not used afterwards).
  std::function<void(std::vector<nlohmann::json>& items)> on_sync;
  std::function<void(WatchEvent& event)> on_event;
  std::function<bool()> done;
  std::chrono::milliseconds tick{1000};
};

// The default arguments of an override are the same as these. Every implementation is thread-safe: the flow
// sends requests from several threads at once (parallel evictions, the taint beside the cordon, the pod
// watch).
class Api {
 public:
  // Evictions sent at once (a real client keeps connections free for everything else beside them).
  static constexpr size_t kParallelEvictions = 6;

  virtual ~Api() = default;

  virtual Result<nlohmann::json> get(const std::string& path) = 0;
  // Every page of a collection, following metadata.continue; items carry kind and apiVersion.
  virtual Result<std::vector<nlohmann::json>> list_all(const std::string& path,
                                                       const ListOptions& options = {}) = 0;
  // The same, each item reduced to kind, apiVersion and metadata.uid, .name and .namespace: what exists,
  // without holding every object whole.
  virtual Result<std::vector<nlohmann::json>> list_identities(const std::string& path,
                                                              const ListOptions& options = {}) = 0;
  virtual Result<nlohmann::json> create(const std::string& path, const nlohmann::json& body) = 0;
  virtual Result<nlohmann::json> patch(const std::string& path, PatchType type,
                                       const nlohmann::json& body) = 0;
  virtual Result<nlohmann::json> remove(const std::string& path, const DeleteOptions& options = {}) = 0;

  // Evicts the pod (the Eviction subresource). 429 = blocked by a PodDisruptionBudget (the message names
  // it, reason TooManyRequests, cause DisruptionBudget), 404 = pod gone.
  virtual Status evict(const std::string& ns, const std::string& name, const DeleteOptions& options = {}) = 0;

  // Creates a core/v1 Event about an object (reason, message, type Normal|Warning); see event_object().
  virtual Status create_event(const nlohmann::json& involved_object, const std::string& reason,
                              const std::string& message, const std::string& type = "Normal") = 0;

  // List then watch `path` (a collection) with the selectors of `options` until handlers.done() returns
  // true (ok), `deadline` passes (error "timed out ..."), or the cancel token fires (error "cancelled").
  // Resumes from the last resourceVersion after a dropped connection; re-lists on 410.
  virtual Status list_watch(const std::string& path, const ListOptions& options,
                            const WatchHandlers& handlers, Deadline deadline = {}) = 0;

  // When the last API server outage this client met ended (the server answered again after not answering
  // or turning requests away); nullopt when it met none. The controllers' caches lag for a while after it.
  [[nodiscard]] virtual std::optional<TimePoint> outage_ended_at() const { return std::nullopt; }
};

// The Event create_event() posts (to /api/v1/namespaces/<metadata.namespace>/events): about a full object
// (metadata.*) or an ObjectReference (name/namespace/uid at the top level); a cluster-scoped object's Events
// go to "default", like the kubelet's. `component` is the reporting component, `now` an RFC 3339 time. Error
// when the object has no name.
Result<nlohmann::json> event_object(const nlohmann::json& involved_object, const std::string& reason,
                                    const std::string& message, const std::string& type,
                                    const std::string& component, const std::string& now);

// API paths.
namespace paths {
std::string nodes();
std::string node(const std::string& name);
std::string pods(const std::string& ns = {});  // "" = all namespaces
std::string pod(const std::string& ns, const std::string& name);
std::string daemonset(const std::string& ns, const std::string& name);
std::string resource_claim(const std::string& ns, const std::string& name);  // resource.k8s.io/v1
std::string runtime_class(const std::string& name);                          // node.k8s.io/v1
std::string pod_disruption_budgets(const std::string& version);  // all namespaces; policy/<version>
}  // namespace paths

}  // namespace dm::kube
