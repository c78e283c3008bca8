// One node of the in-memory tier: a MemoryCluster with its DaemonSet stand-in, node-sim's kubelet and kernel
// (tools/node-sim's Simulator, run in-process against the cluster) on a simulated host in a temporary
// directory, and the uninstall flow run in-process against both. The in-memory twin of
// tests/fixtures/uninstall/fixture.h's Scenario: the same objects, seconds instead of a control plane.
// Everything in it runs on one QuiescentClock: the flow's waits (an operand wait, the late-arrival
// patience, a lease renewal) take the work done in them, not their length.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "manager/rules/settings.h"
#include "support/memory_cluster.h"
#include "support/quiescent_clock.h"

namespace dm::test {

inline constexpr const char* kMemPausedValue = "paused-for-driver-upgrade";

// One operand of the GPU Operator: a DaemonSet selecting on nvidia.com/gpu.deploy.<label>.
struct MemOperand {
  std::string label;
  std::string app;
  bool holds_gpu = false;
  bool stuck = false;  // never finishes terminating
};
std::vector<MemOperand>
default_mem_operands();  // device-plugin, gpu-feature-discovery, dcgm-exporter (holds), validator

// A pod bound to the node (its controller a ReplicaSet that the tier does not run: evicted pods stay gone).
struct MemPod {
  std::string name;
  std::string ns = {};          // "" = the workload namespace
  std::string gpu_client = {};  // value of nvidia.com/gpu.client; "" = none
  bool dra_plugin = false;      // annotated nvidia.com/gpu.client.dra-plugin=true as well
  std::string gpu_claim = {};   // the name of a ResourceClaim of its namespace it references (add_gpu_claim)
  bool request_gpu = false;     // a container limit nvidia.com/gpu: 1 (node-sim: holds the GPU)
  bool holds_gpu = false;       // holds the GPU without requesting it
  bool stuck = false;           // never finishes terminating
  std::string terminate_after = "0.1";
  int grace_period_seconds = 5;
  std::map<std::string, std::string> labels = {};
  std::string owner_kind = "ReplicaSet";                // "" = a bare pod
  std::string runtime_class = {};                       // spec.runtimeClassName; "" = none
  std::map<std::string, std::string> env = {};          // its container's environment
  std::map<std::string, std::string> annotations = {};  // more annotations (CDI devices, say)
  std::string container = "main";                       // its container's name
};

// A DaemonSet of its own (a third-party GPU client, say) whose pods select the node by `node_selector`;
// deploy_daemonset() labels the node to match.
struct MemDaemonSet {
  std::string name;
  std::string ns = {};  // "" = the workload namespace
  std::map<std::string, std::string> node_selector;
  bool holds_gpu = false;
  std::string gpu_client = {};  // value of nvidia.com/gpu.client on its pods; "" = none
  bool stuck = false;           // its pods never finish terminating
  // The nodeSelectorTerms of its required node affinity (null = none), and labels the node gets for it.
  nlohmann::json affinity_terms = nullptr;
  std::map<std::string, std::string> node_labels = {};
  std::map<std::string, std::string> pod_labels = {};  // more labels on its pods (beside app=<name>)
  nlohmann::json tolerations = nullptr;                // its pods' tolerations (null = none)
  nlohmann::json resource_claims = nullptr;            // its pods' spec.resourceClaims (null = none)
};

// What a test starts from: deploy() puts it on the node and waits until every pod of it runs.
struct MemSetup {
  std::vector<MemOperand> operands = default_mem_operands();
  std::vector<MemPod> pods = {};
  std::vector<MemDaemonSet> daemonsets = {};
};

struct MemNodeState {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  nlohmann::json taints = nlohmann::json::array();
  bool unschedulable = false;
  bool operator==(const MemNodeState&) const = default;
};

struct MemRun {
  int exit_code = -1;
  std::string log;  // "<level> <message>" lines of the flow (and node-sim, which logs beside it)
  // On the scenario's clock, from the end of the run (its exit code known, the restore after a failure
  // done) to the end of the last thread it started: its last words (the summary line) and whatever was
  // still running beside it.
  Duration after_run{};
};

class MemoryScenario {
 public:
  explicit MemoryScenario(std::string node = "node-a", bool driver = true);
  ~MemoryScenario();
  MemoryScenario(const MemoryScenario&) = delete;
  MemoryScenario& operator=(const MemoryScenario&) = delete;

  MemoryCluster& cluster() { return cluster_; }
  // The clock the scenario runs on (a token with a deadline on it fires at a moment of the run).
  [[nodiscard]] const Clock& clock() const { return clock_; }
  [[nodiscard]] const std::string& node() const { return node_; }
  [[nodiscard]] std::string operator_ns() const { return "gpu-operator"; }
  [[nodiscard]] std::string workload_ns() const { return "workloads"; }
  [[nodiscard]] std::string sim_path(const std::string& rel) const { return root_ + rel; }

  void label_node(const std::map<std::string, std::string>& labels);
  void annotate_node(const std::string& key, const std::string& value);
  void cordon();
  void deploy_operands(const std::vector<MemOperand>& operands);
  void deploy_pod(const MemPod& pod);
  void deploy_daemonset(const MemDaemonSet& ds);
  // deploy_operands, deploy_daemonset and deploy_pod for each part of `setup`, then waits until all of
  // their pods run.
  void deploy(const MemSetup& setup);
  // A ResourceClaim of the workload namespace allocated a device of the GPU DRA driver (gpu.nvidia.com).
  void add_gpu_claim(const std::string& name);
  // A ResourceClaim of `ns` ("" = the workload namespace) allocated a device of DRA driver `driver`; returns
  // it as stored (its uid filled in).
  nlohmann::json add_claim(const std::string& name, const std::string& driver, const std::string& ns = {});
  // A Mellanox network device on the simulated PCI bus (the MOFED wait looks for one).
  // A RuntimeClass (cluster-scoped) with `handler`.
  void add_runtime_class(const std::string& name, const std::string& handler);
  void add_mellanox_device(const std::string& bdf = "0000:3b:00.0");
  // A budget that allows no disruption of app=<app> pods of the workload namespace (minAvailable 1).
  void block_with_pdb(const std::string& name, const std::string& app);
  // Waits until `n` pods of `ns` run on the node (throws when they do not within 30 s).
  void wait_running(const std::string& ns, size_t n) const;
  [[nodiscard]] size_t running(const std::string& ns) const;

  [[nodiscard]] nlohmann::json node_json() const;
  [[nodiscard]] MemNodeState state() const;
  [[nodiscard]] std::string label(const std::string& key) const;  // "<absent>" when absent
  [[nodiscard]] bool driver_loaded() const;                       // the simulated nvidia module
  // Requests of the flow whose "<VERB> <path>" contains `part`.
  [[nodiscard]] size_t requests_with(const std::string& part) const;
  // The pods ("ns/name") the flow asked to evict, in the order of its first request for each.
  [[nodiscard]] std::vector<std::string> evicted() const;

  // What the integration tests run driver-manager with, for this node.
  [[nodiscard]] manager::Settings settings() const;
  // Runs the flow to its end (or until `cancel` fires: SIGTERM).
  MemRun run(const manager::Settings& settings, const CancelToken& cancel = CancelToken());

 private:
  // Captures the log from before node-sim's thread starts until after it ends: no thread logs through a
  // logger that is being replaced.
  class Log;
  std::unique_ptr<Log> log_;
  QuiescentClock clock_;  // before the cluster and node-sim, which wait on it
  MemoryCluster cluster_;
  std::string node_;
  std::string root_;
  CancelToken stop_sim_;
  std::thread sim_;
};

}  // namespace dm::test
