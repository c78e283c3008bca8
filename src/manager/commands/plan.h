// `driver-manager plan`: what uninstall_driver would do on this node now, read from the same sources (the
// node, its pods, PodDisruptionBudgets, DaemonSets and claims the pod filters ask about, the host) and
// decided by the same functions the flow calls: the path and its steps are the run's own (manager/flow_plan),
// each step rendered here; the pods of each step are decided by the pipelines the step runs (pause_waits,
// the gpu-client and workload pipelines, the taint plan). Nothing is written: no patch, no eviction, no
// Event, no lease. docs/plan.md describes the output.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "host/host.h"
#include "kube/api.h"
#include "manager/commands/flow_plan.h"
#include "manager/commands/own_pod.h"
#include "manager/rules/pdb.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/settings.h"
#include "manager/rules/skip.h"
#include "manager/rules/upgrade_wave.h"

namespace dm::manager {

// Everything the plan is decided from. The reads fill it (read_plan_inputs); unit tests build it by hand.
struct PlanInputs {
  nlohmann::json node;  // GET node
  // When the node was read: a lease's time left counts from it (unset: a lease's state is not judged).
  std::optional<std::chrono::system_clock::time_point> read_at;
  std::vector<nlohmann::json> pods;  // the pods on the node
  PodFacts facts;                    // DaemonSet and ResourceClaim lookups (null functions: none asked)

  std::optional<OwnPodRef> own_pod_ref;
  std::optional<OwnPod> own_pod;
  std::string own_pod_error;  // the own pod could not be read (e.g. forbidden)

  std::optional<std::vector<nlohmann::json>> pdbs;  // nullopt: not readable
  std::string pdb_version = "v1";                   // policy/<version> the list came from
  std::string pdb_error;                            // why they could not be read

  // The host.
  std::optional<std::string> host_driver_version;
  Status can_unload;
  bool nvidia_loaded = false;
  bool nouveau_loaded = false;
  std::vector<host::ModuleState> modules;    // the loaded modules of host::kNvidiaModules, unload order
  std::vector<host::HolderProcess> holders;  // processes with NVIDIA device files open
  std::vector<std::string> mounts;           // mount points under the driver root (host paths)
  std::string mounts_error;                  // the mount table could not be read
  SkipDecision skip;
  std::optional<std::string> mellanox_device;  // only looked for with GPU_DIRECT_RDMA_ENABLED
  bool mofed_ready = false;
  // Off the node (on_node false) the host is not read: the facts above are inferred from the API
  // (infer_host_from_api) and the modules, holders and mounts are "on the node only".
  bool on_node = true;
  std::string host_note;  // off the node: where the inferred facts come from

  std::optional<std::vector<nlohmann::json>> claims;  // the cluster's ResourceClaims; nullopt: not read
  std::string claims_note;                            // why they were not read
  size_t gpu_slices = 0;  // the node's gpu.nvidia.com ResourceSlices (0 when they could not be listed)
};

// A node label the run would write.
struct PlanLabel {
  std::string key;
  std::string from;  // "" = absent
  std::string to;
  std::string batch;  // "pause" (restored at the end), "dra-plugin" (paused last), "pre-installed"
};

// What the run would do with one pod.
enum class PodAction : std::uint8_t { kWait, kReset, kEvict, kRefused, kIgnored };
// What it would do with the GPU client taint.
enum class TaintAction : std::uint8_t { kNone, kAdd, kAlreadyOurs, kPresentNotOurs };
// What it would do with the node's schedulability.
enum class CordonAction : std::uint8_t { kNone, kCordon, kAlreadyOurs, kCordonedByOther };

// The words of the output ("wait", "already-ours", "cordoned-by-other", ...), one table each.
std::string_view action_name(PodAction a);
std::string_view action_name(TaintAction a);
std::string_view action_name(CordonAction a);

struct PlanPod {
  std::string pod;  // namespace/name
  PodAction action = PodAction::kIgnored;
  std::string step;  // operands | gpu-clients | gpu-workloads | dra-plugin-clients | dra-plugin | ""
  std::string reason;
  std::vector<std::string> warnings;
  std::string filter;  // the pod filter that decided it ("" = a step's own rule, e.g. an operand wait)
};

struct PlanModule {
  std::string name;
  int refcount = 0;
  std::vector<std::string> holders;  // modules using it
  std::vector<std::string> users;    // processes with its device files open
};

// A DRA ResourceClaim of the GPU driver that a pod on the node holds.
struct PlanClaim {
  std::string claim;  // namespace/name
  std::string pod;    // namespace/name
};

struct Plan {
  std::string node;
  FlowPlan flow;  // the run's path and steps, as the run decides them
  // Why DRA counts as in use when the operator did not deploy its driver here ("" otherwise; dra_plugin.h).
  std::string dra_in_use;
  std::string path_reason;
  std::vector<std::string> refusals;  // what would make the run fail, and at which step
  std::vector<std::string> steps;     // the steps of `flow`, rendered in order

  bool upgrade_policy = false;
  bool gpu_pod_eviction = false;  // effective (the policy supersedes it)
  bool auto_drain = false;        // effective
  std::vector<PlanLabel> labels;

  std::string taint;  // the configured GPU client taint
  TaintAction taint_action = TaintAction::kNone;
  std::string taint_reason;
  std::string own_pod;       // namespace/name, "" when not found
  std::string own_pod_note;  // how it was looked for, or why it was not found/read
  std::optional<bool> own_pod_tolerates;

  CordonAction cordon = CordonAction::kNone;
  std::string cordon_reason;

  std::vector<PlanPod> pods;
  // The GPU clients reset with the taint: those it keeps off the node until the end, and those that
  // tolerate it (their controller recreates them at once, docs/gpu-clients.md).
  std::vector<std::string> clients_kept_off;
  std::vector<std::string> clients_tolerating;
  std::vector<PlanClaim> dra_claims;  // GPU claims held by pods on the node
  std::string dra_claims_note;        // "" or why the claims are unknown
  NodeEstimate estimate;              // the node's time out (the pods that go, plus the overhead)
  std::vector<PdbImpact> pdbs;
  std::string pdb_note;  // "" or why the budgets are unknown

  bool host_on_node = true;         // false: the host part was not read (plan run off the node)
  std::string host_note;            // off the node: where the inferred host facts come from
  std::string host_driver_version;  // "" = none
  bool nvidia_loaded = false;
  std::string unload;  // can the kernel unload the stack now, and if not why
  std::vector<PlanModule> modules;
  std::vector<std::string> holders;  // "nvidia: held by pid 42 (python3) in pod ml/train-0"
  std::vector<std::string> mounts;
  std::string mounts_note;
  std::string skip;                    // the skip decision's summary, "" when the path never asks it
  std::vector<std::string> leftovers;  // traces of earlier runs on the node and what would happen to them
  std::vector<std::string> notes;      // reads that failed or were forbidden
};

// Decides the plan from the inputs (no I/O).
Plan build_plan(const Settings& settings, const PlanInputs& in);

// Reads the inputs; an error (node or pods not readable) names what was refused and why. Reads that only
// refine the plan (own pod, PDBs) go to the inputs' *_error fields instead. The host is read only when
// plan runs on the node (is_on_node); otherwise its facts are inferred from the API.
Result<PlanInputs> read_plan_inputs(const Settings& settings, kube::Api& client, host::Host& host);

// The reads a node's plan and a wave's share: the cluster's PodDisruptionBudgets (policy/v1, else v1beta1)
// and ResourceClaims (resource.k8s.io/v1; a server without it has none). A refusal goes to the *_error /
// *_note fields.
void read_pdbs(kube::Api& client, PlanInputs& in);
void read_claims(kube::Api& client, PlanInputs& in);
// "<what>: forbidden (<message>)" or "<what>: <message>".
std::string read_error(const std::string& what, const Error& e);
// This machine's hostname ("" when unknown).
std::string machine_hostname();

// Does plan run on the node it plans for: a simulated host (DRIVER_MANAGER_SIM_ROOT stands for the node), its
// own pod bound to the node, or this machine's hostname equal to the node's name.
bool is_on_node(const Settings& settings, const PlanInputs& in, const std::string& machine_hostname);

// A DaemonSet pod in OPERATOR_NAMESPACE with an init container k8s-driver-manager or DRIVER_CONFIG_DIGEST in
// a container's environment: what the driver DaemonSet's pods look like (a wave plan keeps such pods whole).
bool shaped_as_driver_pod(const nlohmann::json& pod, const std::string& operator_namespace);

// The pod of the driver DaemonSet on the node (the pod a run would be the init container of): a
// DaemonSet pod in OPERATOR_NAMESPACE with an init container k8s-driver-manager or DRIVER_CONFIG_DIGEST in
// a container's environment; nullptr when none.
const nlohmann::json* find_driver_pod(const std::vector<nlohmann::json>& pods,
                                      const std::string& operator_namespace);

// A DaemonSet by namespace and name (nullopt: unknown or absent).
using DaemonSetLookup =
    std::function<std::optional<nlohmann::json>(const std::string& ns, const std::string& name)>;

// Off the node: the host facts the run would read, inferred from the API (docs/plan.md, Off the node).
// Pre-installed host driver: the node label nvidia.com/gpu.deploy.driver=pre-installed. Driver loaded: a
// driver pod runs on the node. Skip decision: DRIVER_CONFIG_DIGEST (or, unset, that of the driver pod's
// DaemonSet template) against the digest of the driver pod's spec, which is what its driver container wrote
// to the state file. The own pod, when not found otherwise, is the driver pod. Sets on_node false.
void infer_host_from_api(const Settings& settings, PlanInputs& in, const DaemonSetLookup& daemonset);

// Pod facts answered from lists read once (the cluster's DaemonSets and ResourceClaims) instead of a GET
// per pod; nullopt lists: the DaemonSet is assumed to exist, no pod holds a claim.
PodFacts listed_pod_facts(const std::shared_ptr<const std::vector<nlohmann::json>>& daemonsets,
                          const std::shared_ptr<const std::vector<nlohmann::json>>& claims);

// The step that looks for GPU users once more before the unload, in words (`workloads`: GPU workloads are
// evicted too, not only annotated clients).
std::string late_arrivals_line(bool workloads);

// The renderers: a table for people, JSON for tools.
std::string render_plan_text(const Plan& plan);
nlohmann::json plan_to_json(const Plan& plan);

// The sub-command: same settings as uninstall_driver; `output` "text" or "json". Exit 0 when the plan was
// printed, 1 otherwise.
int run_plan(const Settings& settings, const std::string& output);

}  // namespace dm::manager
