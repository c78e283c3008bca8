// `driver-manager plan --all-nodes | --selector S`: what a driver upgrade wave would disrupt, cluster-wide,
// before it starts. Each node's plan is the one-node plan (build_plan) decided from objects read once for
// the whole cluster - the nodes, all pods, the PodDisruptionBudgets, DaemonSets, ResourceClaims and the
// ClusterPolicy, one paged list each - with the host facts
// inferred from the API (infer_host_from_api). The summary adds the nodes up and estimates the wave under
// the GPU Operator's upgrade policy. Nothing is written. docs/plan.md describes the output.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "kube/api.h"
#include "manager/plan/inputs.h"
#include "manager/plan/report.h"
#include "manager/plan/wave_pods.h"
#include "manager/rules/settings.h"
#include "manager/rules/upgrade_wave.h"

namespace dm::manager {

// The nodes of a wave: those a label selector picks ("": every node). The default: the nodes the driver
// DaemonSet targets.
struct WaveSelection {
  static constexpr const char* kDefaultSelector = "nvidia.com/gpu.deploy.driver=true";
  std::string selector = kDefaultSelector;
  [[nodiscard]] std::string describe() const;
};

// What a wave is planned from: every list read once. read_wave_inputs fills it; unit tests build it.
struct WaveInputs {
  std::vector<nlohmann::json> nodes;
  WavePods pods;      // the pods bound to the nodes
  PlanInputs shared;  // the PDBs and ResourceClaims of the cluster, as a node's plan takes them
  std::shared_ptr<const std::vector<nlohmann::json>> daemonsets;  // nullptr: not readable
  std::string daemonsets_note;
  // RuntimeClass name -> handler; nullptr: not readable (only the toolkit's class names count, gpu_access.h).
  std::shared_ptr<const std::map<std::string, std::string>> runtime_handlers;
  std::string runtime_classes_note;
  std::optional<std::vector<nlohmann::json>> cluster_policies;  // nullopt: not readable
  std::string cluster_policy_note;                              // why not
  uint64_t requests = 0;                                        // API requests the reads took
};

// A node the wave would stop at, and on what.
struct WaveBlocker {
  std::string node;
  std::vector<std::string> on;
};

struct WaveSummary {
  std::map<std::string, std::vector<std::string>> nodes_by_path;  // path name -> nodes
  std::map<std::string, int64_t> pods_by_category;                // step -> pods that go
  std::vector<WaveBlocker> blocking;
  std::vector<std::string> clients_tolerating;  // node: pod, clients the taint does not keep off
  int64_t dra_claims = 0;
  UpgradePolicy policy;
  std::string policy_note;  // the ClusterPolicy could not be read (the defaults are assumed)
  Parallelism parallelism;
  WaveEstimate estimate;
  int64_t nodes_estimated = 0;  // the nodes the estimate covers (a pre-installed node takes no part)
  std::string estimate_note;
};

struct Wave {
  WaveSelection selection;
  std::vector<Plan> nodes;
  WaveSummary summary;
  std::vector<std::string> notes;  // reads that failed or were forbidden
  uint64_t requests = 0;
};

// Reads the wave's inputs: the nodes (the selection), all pods, the PDBs, DaemonSets, ResourceClaims and
// ClusterPolicies, one list each (the nodes and pods a page at a time, kPageSize objects a request, so that
// no response holds the whole cluster). Only the pods bound to the selected nodes are kept. An error (nodes
// or pods not readable) names what was refused.
inline constexpr int64_t kPageSize = 500;
Result<WaveInputs> read_wave_inputs(const Settings& settings, const WaveSelection& selection,
                                    kube::Api& client);

// One node's plan inputs from the wave's lists (`pods`: the pods bound to the node).
PlanInputs node_plan_inputs(const Settings& settings, const WaveInputs& in, nlohmann::json node,
                            std::vector<nlohmann::json> pods);

// Why a node's plan would stop the wave there (a refusal, a budget that blocks an eviction); empty: none.
std::vector<std::string> blocking_reasons(const Plan& plan);

// Adds the nodes' plans up under `policy` (no I/O).
WaveSummary summarise_wave(const std::vector<Plan>& plans, const UpgradePolicy& policy);

// Plans every node of the inputs and sums them up (no I/O). The inputs are used up node by node (each
// node's object and pods are freed once it is planned), so that the plans and the inputs are not held in
// full at once.
Wave build_wave(const Settings& settings, const WaveSelection& selection, WaveInputs in);

std::string render_wave_text(const Wave& wave);
nlohmann::json wave_to_json(const Wave& wave);
// Writes wave_to_json(wave).dump(2) and a newline to `out`, one node's plan at a time, so that the whole
// document is never built at once.
void write_wave_json(const Wave& wave, std::FILE* out);

// The sub-command: exit 0 when the plan was printed, 1 otherwise.
int run_plan_wave(const Settings& settings, const WaveSelection& selection, const std::string& output);

}  // namespace dm::manager
