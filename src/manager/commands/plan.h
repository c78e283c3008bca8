// `driver-manager plan`: what uninstall_driver would do on this node now, read from the same sources (the
// node, its pods, PodDisruptionBudgets, DaemonSets and claims the pod filters ask about, the host) and
// decided by the same functions the flow calls: the path and its steps are the run's own (manager/flow_plan),
// each step rendered here; the pods of each step are decided by the pipelines the step runs (pause_waits,
// the gpu-client and workload pipelines, the taint plan). Nothing is written: no patch, no eviction, no
// Event, no lease. docs/plan.md describes the output.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "host/host.h"
#include "kube/client.h"
#include "manager/commands/flow_plan.h"
#include "manager/commands/own_pod.h"
#include "manager/rules/pdb.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/settings.h"
#include "manager/rules/skip.h"

namespace dm::manager {

// Everything the plan is decided from. The reads fill it (read_plan_inputs); unit tests build it by hand.
struct PlanInputs {
  nlohmann::json node;               // GET node
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
};

struct PlanModule {
  std::string name;
  int refcount = 0;
  std::vector<std::string> holders;  // modules using it
  std::vector<std::string> users;    // processes with its device files open
};

struct Plan {
  std::string node;
  FlowPlan flow;  // the run's path and steps, as the run decides them
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
  std::vector<PdbImpact> pdbs;
  std::string pdb_note;  // "" or why the budgets are unknown

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
// refine the plan (own pod, PDBs) go to the inputs' *_error fields instead.
Result<PlanInputs> read_plan_inputs(const Settings& settings, kube::Client& client, host::Host& host);

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
