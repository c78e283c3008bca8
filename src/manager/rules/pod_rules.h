// Decisions about individual pods, kubectl-drain style (docs/ARCHITECTURE.md): an ordered list of small
// filters, each saying delete / skip / wait / error and why, so every pod the program touches or leaves alone
// is one log line. Three pipelines are built from them: GPU-workload eviction (with its all-or-none rule),
// the full-drain fallback (`kubectl drain` semantics) and third-party gpu-client pods; docs/behaviour.md
// describes each. Pure functions over pod JSON; API answers come in through PodFacts.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/go_bool.h"
#include "common/result.h"
#include "kube/objects.h"
#include "manager/rules/claims.h"
#include "manager/rules/gpu_access.h"
#include "manager/rules/label_pause.h"
#include "manager/rules/label_selector.h"
#include "manager/rules/taints.h"

namespace dm::manager {

// Pod annotation designating a third-party GPU client (value: Go bool; true = reset it, false = opt out).
inline constexpr std::string_view kGpuClientAnnotation = "nvidia.com/gpu.client";
// Additionally set (Go bool true) on a gpu-client that is a DRA kubelet plugin serving claims: it is reset
// after the GPU workloads and the claim-holder guard, right before the module unload (it serves their claims'
// release).
inline constexpr std::string_view kGpuClientDraPluginAnnotation = "nvidia.com/gpu.client.dra-plugin";

// --- Pod facts computed from the JSON alone (the generic ones are in kube/objects.h) ------------------
// How a pod is designated by kGpuClientAnnotation.
enum class ClientDesignation {
  kNone,     // no annotation
  kClient,   // Go-bool true
  kOptOut,   // Go-bool false
  kInvalid,  // not a Go bool: treated as not designated, said so in the decision
};
ClientDesignation gpu_client_designation(const nlohmann::json& pod);
// kGpuClientDraPluginAnnotation parses as Go-bool true, or the pod is the DRA driver chart's kubelet plugin
// (dra_plugin.h), a GPU client by what it is unless annotated kGpuClientAnnotation=false.
bool is_dra_plugin_client(const nlohmann::json& pod);

// --- Filters and pipelines ------------------------------------------------------------------------
enum class Verdict {
  kDelete,    // evict it
  kSkip,      // leave it alone
  kWaitOnly,  // do not evict (already terminating), but wait for it to be gone
  kError,     // it blocks the operation (refused); the reason says what to do
};
std::string_view to_string(Verdict v);

// A filter's answer. kDelete passes the pod to the next filter; a non-empty reason with kDelete is a
// warning that is kept with the decision.
// How loudly a decision is logged: pods that are nothing to this pipeline are only of interest when
// debugging; a skip the operator should fix (a malformed annotation) is a warning.
enum class Notice { kQuiet, kNormal, kWarning };

struct FilterResult {
  Verdict verdict = Verdict::kDelete;
  std::string reason;
  Notice notice = Notice::kNormal;
  // kDelete only: `reason` is why the pod is taken (it replaces the pipeline's default reason), not a
  // warning.
  bool names_why = false;
};

struct PodFilter {
  std::string name;  // short, appears in the log line ("daemonset", "mirror", ...)
  std::function<FilterResult(const nlohmann::json& pod)> apply;
};

// The outcome for one pod.
struct PodDecision {
  std::string pod;  // ns/name
  Verdict verdict = Verdict::kDelete;
  std::string filter;                 // filter that decided; "" when every filter let it through
  std::string reason;                 // why (for kDelete: "" or the pipeline's default reason)
  std::vector<std::string> warnings;  // from filters that let it through with a warning
  Notice notice = Notice::kNormal;    // of the deciding filter
  // One log line: "<ns/name>: <verdict> [<filter>]: <reason>[; warning: ...]".
  [[nodiscard]] std::string log_line() const;
};

class PodPipeline {
 public:
  // delete_reason: the decision's reason when every filter lets a pod through.
  PodPipeline(std::string name, std::vector<PodFilter> filters, std::string delete_reason = {});
  // Runs the filters in order; the first non-delete verdict wins.
  [[nodiscard]] PodDecision decide(const nlohmann::json& pod) const;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::vector<PodFilter>& filters() const { return filters_; }

 private:
  std::string name_;
  std::vector<PodFilter> filters_;
  std::string delete_reason_;
};

// Answers only the API can give, injected so the rules stay pure. Null functions: the DaemonSet is
// assumed to exist; the pod holds no GPU claim (clusters without DRA).
struct PodFacts {
  // Does DaemonSet ns/name exist (GET apps/v1 daemonset; 404 => false).
  std::function<Result<bool>(const std::string& ns, const std::string& name)> daemonset_exists;
  // Does the pod hold an allocated gpu.nvidia.com ResourceClaim (claims.h + GET resourceclaims).
  std::function<Result<bool>(const nlohmann::json& pod)> holds_gpu_claim;
  // The allocated claims of NVIDIA's DRA drivers the pod references (claims.h; the same lookups). Null: not
  // read (what keeps a DRA driver helper is then told without its claims' holders).
  std::function<Result<std::vector<ClaimHold>>(const nlohmann::json& pod)> claim_holds;
  // The handler of a RuntimeClass (GET node.k8s.io/v1 runtimeclasses; gpu_access.h). Null: pods are not
  // counted as GPU pods through their RuntimeClass.
  RuntimeClassLookup runtime_class_handler;
  // The pod template (spec.template) of DaemonSet ns/name (GET apps/v1 daemonset). Nullopt: gone, or it may
  // not be read. Null: not asked.
  std::function<std::optional<nlohmann::json>(const std::string& ns, const std::string& name)>
      daemonset_template;
};

struct DrainOptions {
  bool force = false;                 // DRAIN_USE_FORCE
  bool delete_emptydir_data = false;  // DRAIN_DELETE_EMPTYDIR_DATA
};

// What the daemonset filter does with a pod of an existing DaemonSet (kubectl drain's --ignore-daemonsets).
enum class DaemonSetPods { kRefuse, kIgnore };

// Individual filters (kubectl drain's, in its order, plus ours).
// DaemonSet-owned, non-terminal: DaemonSet missing => delete with a warning if options.force, else error;
// present => skip with a warning if kIgnore, else error "cannot delete DaemonSet-managed Pods ...".
PodFilter daemonset_filter(DaemonSetPods existing, const DrainOptions& options, const PodFacts& facts);
// Mirror (static) pod: `verdict` (drain: kSkip; gpu clients: kError, the kubelet recreates it).
PodFilter mirror_filter(Verdict verdict);
// Non-terminal pod with an emptyDir volume: delete with a warning if options.delete_emptydir_data, else
// error.
PodFilter emptydir_filter(const DrainOptions& options);
// Non-terminal pod without a controller: delete with a warning if options.force, else error.
PodFilter controller_filter(const DrainOptions& options);
// Skip pods that do not use a GPU (requests_gpu_resources || facts.holds_gpu_claim); a claim lookup
// error is an error verdict.
PodFilter gpu_filter(const PodFacts& facts);
// Skip pods whose labels the selector does not match (no-op when empty).
PodFilter selector_filter(const LabelSelector& selector);
// Skip pods that have finished (Succeeded/Failed).
PodFilter terminal_skip_filter();
// Wait for (do not evict) pods that are already terminating.
PodFilter terminating_wait_filter();
// Skip a helper pod of NVIDIA's DRA driver (dra_helpers.h: a ComputeDomain or MPS control daemon): its
// controller would bring it straight back, and it leaves when the DRA kubelet plugin unprepares the claims
// that need it (the run waits for it, docs/behaviour.md, DRA driver helpers). First in every pipeline.
PodFilter dra_helper_filter();

// GPU workload eviction: dra-helper -> daemonset(ignore all) -> mirror(skip) -> emptydir -> controller ->
// gpu.
PodPipeline gpu_workload_pipeline(const DrainOptions& options, const PodFacts& facts);
// Bash `kubectl drain --ignore-daemonsets --pod-selector=...`: dra-helper -> selector -> daemonset(ignore
// all) -> mirror(skip) -> emptydir -> controller.
PodPipeline full_drain_pipeline(const DrainOptions& options, const LabelSelector& selector,
                                const PodFacts& facts);

// Which gpu-client pods a run of the client pipeline takes.
enum class GpuClientPhase {
  kWithOperands,  // annotated clients without the DRA-plugin annotation (after the pause batch + waits)
  kDraPlugin,     // annotated clients with the DRA-plugin annotation (after GPU workloads, before unload)
};

struct GpuClientOptions {
  GpuClientPhase phase = GpuClientPhase::kWithOperands;
  bool force = false;  // DRAIN_USE_FORCE: allow controller-less pods (evicting deletes them for good)
  std::optional<kube::Taint> taint;  // pods tolerating it get a warning (they come back at once)
  // The run's label pause: DaemonSet pods that pausing gpu.deploy.client or the custom key takes off the
  // node are handled (and waited for) through the label, not evicted. Null: none are.
  std::shared_ptr<const LabelPause> label_pause;
};

// gpu clients: dra-helper -> designation -> phase -> terminal(skip) -> label-handled(skip) ->
// terminating(wait) -> mirror(error) -> controller(error unless force) -> toleration(warning).
PodPipeline gpu_client_pipeline(const GpuClientOptions& options);

// A pipeline applied to a pod list.
struct PodListDecision {
  std::vector<nlohmann::json> to_evict;  // kDelete
  std::vector<nlohmann::json> to_wait;   // kWaitOnly
  std::vector<PodDecision> decisions;    // one per input pod, input order (log each)
  std::vector<std::string> errors;       // "<ns/name>: <reason>" for each kError
  [[nodiscard]] bool ok() const { return errors.empty(); }
};
PodListDecision decide_pods(const PodPipeline& pipeline, const std::vector<nlohmann::json>& pods);
// The pods of the node as the pod watch's cache held them at one moment, shared with the cache instead of
// copied: the cache never changes a pod it handed out (an update replaces it), so a snapshot stays valid
// without a lock.
using PodSnapshot = std::vector<std::shared_ptr<const nlohmann::json>>;
// decide_pods over a snapshot (no pod is copied but those the decision keeps).
PodListDecision decide_pods(const PodPipeline& pipeline, const PodSnapshot& pods);

// The templates of the DaemonSets of `pods` (not finished), one facts.daemonset_template per DaemonSet, for
// LabelPause::daemonset_templates; empty when facts.daemonset_template is null.
DaemonSetTemplates daemonset_templates_of(const std::vector<nlohmann::json>& pods, const PodFacts& facts);
DaemonSetTemplates daemonset_templates_of(const PodSnapshot& pods, const PodFacts& facts);

// GPU workload eviction with its all-or-none rule: gpu_pods = pods using a GPU (a GPU resource, else one
// claim lookup per pod, else gpu_access_without_request, whose reason the pod's decision carries; a DRA
// driver helper is none of them, decided by dra_helper_filter); every one of them must come out kDelete, else
// each that does not is added to errors (=> "Cannot delete all GPU pods"). A claim lookup error is returned
// as the error.
struct GpuEvictionDecision {
  PodListDecision pods;
  size_t gpu_pods = 0;
};
Result<GpuEvictionDecision> decide_gpu_workload_eviction(const std::vector<nlohmann::json>& pods,
                                                         const DrainOptions& options, const PodFacts& facts);
Result<GpuEvictionDecision> decide_gpu_workload_eviction(const PodSnapshot& pods, const DrainOptions& options,
                                                         const PodFacts& facts);

}  // namespace dm::manager
