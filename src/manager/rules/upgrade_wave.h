// How long an upgrade wave takes the GPU nodes out, estimated before it starts (`plan --all-nodes`,
// docs/plan.md): one node's time out from the grace periods of the pods that go, the GPU Operator's upgrade
// policy (how many nodes at once) read from a ClusterPolicy, and the wave as those nodes taken that many at
// a time. Pure arithmetic over JSON and durations: no request.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace dm::manager {

// What driver-manager adds to the slowest pod's termination on one node: the highest "beyond the slowest
// pod" figure of the standard benchmark node on the current build (docs/benchmarks.md, Results: 0.36-0.71 s
// at load 11-12; 0.25-0.32 s on an idle machine), rounded up.
inline constexpr std::chrono::milliseconds kMeasuredOverhead{750};

// One node's time out, as far as this program is concerned: every pod that goes uses its whole
// termination grace period (an upper bound: most exit sooner), side by side, plus kMeasuredOverhead.
struct NodeEstimate {
  int64_t longest_grace_seconds = 0;  // 0 when no pod goes
  std::string longest_grace_pod;      // namespace/name, "" when no pod goes
  std::chrono::milliseconds total{0};
};
// `grace_seconds[i]` is the grace period of `pods[i]` (namespace/name), a pod the run waits for or evicts.
NodeEstimate estimate_node(const std::vector<std::string>& pods, const std::vector<int64_t>& grace_seconds);

// The GPU Operator's driver upgrade policy (ClusterPolicy spec.driver.upgradePolicy), with the chart's
// defaults where the cluster says nothing.
struct UpgradePolicy {
  bool auto_upgrade = true;
  int64_t max_parallel_upgrades = 1;    // 0 = no limit
  std::string max_unavailable = "25%";  // a number of nodes, or a percentage of them (rounded up)
  std::string source;                   // where the values come from, one line
};

// The policy of the first ClusterPolicy in `items` (a list's items); an item without upgradePolicy, or an
// empty list, gives the defaults with `source` saying so. A value of the wrong type is an error.
Result<UpgradePolicy> upgrade_policy_from(const std::vector<nlohmann::json>& items);

// maxUnavailable for `nodes` nodes: "N" or "P%" (P% of nodes, rounded up); an error names a bad value.
Result<int64_t> resolve_max_unavailable(const std::string& value, int64_t nodes);

// How many of `nodes` nodes are upgraded at once under `policy`: the smaller of maxParallelUpgrades (0: all)
// and maxUnavailable; at least 1 (a wave that may take no node out never starts: `note` says so).
struct Parallelism {
  int64_t nodes_at_once = 1;
  std::string note;  // how it was reached, one line
};
Result<Parallelism> wave_parallelism(const UpgradePolicy& policy, int64_t nodes);

// The wave: nodes taken `at_once` at a time, the longest first, each next node starting as soon as a slot
// frees (a node's time out is its NodeEstimate::total).
struct WaveEstimate {
  std::chrono::milliseconds total{0};
  int64_t rounds = 0;  // ceil(nodes / at_once)
};
WaveEstimate estimate_wave(const std::vector<std::chrono::milliseconds>& node_times, int64_t at_once);

// An estimate for people, "1m5s", "2.5s", "750ms" (DurationStyle::kRoundedTenths).
std::string human_duration(std::chrono::milliseconds d);

}  // namespace dm::manager
