// Taking pods off the node: GPU-workload eviction, the full-drain fallback with `kubectl drain`
// semantics and the DRA claim-holder guard (docs/behaviour.md, the sections of those names). Decisions come
// from the pod_rules pipelines, evictions from the eviction engine.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "manager/node/node_ops.h"
#include "manager/pods/pod_watch.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// What the eviction and the drain work with: the settings, the cluster, this node and its pods, one clock
// and the token that stops them (SIGTERM, or a step beside them that failed).
struct DrainContext {
  const Settings& settings;
  kube::Api& client;
  const Clock& clock;
  CancelToken cancel;
  NodeOps& node;
  PodWatch& pods;
};

// PodFacts answered by the API: DaemonSet existence (GET apps/v1) and GPU ResourceClaims (GET
// resource.k8s.io/v1; 404 - also on clusters without that API - means "no claim").
PodFacts api_pod_facts(kube::Api& client);

// DRAIN_USE_FORCE and DRAIN_DELETE_EMPTYDIR_DATA as the pod filters take them.
DrainOptions drain_options(const Settings& settings);

// Whether this run evicts GPU pods and may fall back to a full drain: the GPU Operator's upgrade policy
// (node annotation) supersedes both.
struct EvictionSwitches {
  bool gpu_pod_eviction = false;  // ENABLE_GPU_POD_EVICTION, unless the policy is on
  bool auto_drain = false;        // ENABLE_AUTO_DRAIN, unless the policy is on
};
EvictionSwitches eviction_switches(const Settings& settings, bool upgrade_policy_enabled);

// The deadline of DRAIN_TIMEOUT_SECONDS (zero = no limit, as upstream).
Deadline drain_deadline(const DrainContext& ctx);

// Pods that a step running beside the GPU-workload eviction takes off the node (the operand wait, the
// gpu-client reset): the reason, or nullopt for a pod that is the eviction's to decide.
using TakenBeside = std::function<std::optional<std::string>(const nlohmann::json& pod)>;

// Evicts every GPU-using pod of the node (the caller has cordoned it). Fails without evicting anything
// if some GPU pod cannot be evicted ("Cannot delete all GPU pods", the equality rule), or when the
// evictions do not finish before DRAIN_TIMEOUT_SECONDS. Pods `beside` names are neither evicted nor counted
// in the equality rule (an operand DaemonSet pod still terminating is no refusal). `evicted_uids`, when
// given, receives the UIDs it evicts or waits for.
Status evict_gpu_workloads(const DrainContext& ctx, const TakenBeside& beside = {},
                           std::vector<std::string>* evicted_uids = nullptr);

// The full-drain fallback: evicts every pod of the node except DaemonSet and mirror pods (and pods the
// DRAIN_POD_SELECTOR_LABEL selector does not match), with the same filters, PDB handling and deadline
// as evict_gpu_workloads. The caller has cordoned the node.
Status drain_node(const DrainContext& ctx);

// The DRA claim guard: fails naming the pods that still hold an allocated gpu.nvidia.com ResourceClaim.
Status check_dra_claim_holders(const DrainContext& ctx);

}  // namespace dm::manager
