// The eviction engine: evicts a set of pods in parallel through the Eviction API under one deadline,
// retrying PodDisruptionBudget refusals (429), and waits until each original pod UID is gone from the pod
// watch. Used for GPU workloads, the full-drain fallback, and gpu-client pods (docs/behaviour.md, GPU
// workload eviction).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "manager/pods/pod_watch.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

// One pod to take off the node. Only this UID counts: a same-name replacement is not waited for.
struct EvictionTarget {
  std::string ns;
  std::string name;
  std::string uid;
  bool evict = true;           // false: already terminating, only wait for it to be gone
  int64_t grace_seconds = 30;  // the pod's own grace period (the longest are evicted first)
};

struct EvictionOptions {
  std::string what = "pods";                                 // for logs: "GPU pods", "gpu-client pods"
  Duration retry_interval = std::chrono::seconds(5);         // between 429 (PDB) retries
  Duration blocked_log_interval = std::chrono::seconds(30);  // a blocked pod's message, at most this often
  std::optional<int64_t> grace_period_seconds;               // nullopt: the pod's own grace period
};

// EvictionTarget (to evict) from a pod object.
EvictionTarget eviction_target(const nlohmann::json& pod);
// The targets of a pod list decision: its pods to evict, then those already terminating (only waited for).
std::vector<EvictionTarget> targets_of(const PodListDecision& decision);

// The targets to evict (not those only waited for), as indices into `targets`, in the order their evictions
// go out: the longest grace period first (`grace_override`, when set, is every pod's), so that the pods that
// may take longest to go start first; ties keep their order.
std::vector<size_t> eviction_order(const std::vector<EvictionTarget>& targets,
                                   std::optional<int64_t> grace_override = std::nullopt);

// Evicts `targets` in parallel (in eviction_order()) and waits until all of their UIDs are gone from `watch`.
// Logs "evicting pod ns/name" per pod and, at most every blocked_log_interval, the API server's refusal (it
// names the disruption budget). Errors: `deadline` passed (naming the pods left and why), `cancel` fired, or
// an eviction failed for a reason a retry cannot fix (e.g. 403).
Status evict_pods(kube::Api& client, const PodWatch& watch, const Clock& clock,
                  const std::vector<EvictionTarget>& targets, Deadline deadline, const CancelToken& cancel,
                  const EvictionOptions& options = {});

}  // namespace dm::manager
