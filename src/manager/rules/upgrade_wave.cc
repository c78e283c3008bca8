#include "manager/rules/upgrade_wave.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>

#include "common/duration_text.h"
#include "kube/objects.h"

namespace dm::manager {

using Json = nlohmann::json;
using std::chrono::milliseconds;

NodeEstimate estimate_node(const std::vector<std::string>& pods, const std::vector<int64_t>& grace_seconds) {
  NodeEstimate e;
  for (size_t i = 0; i < pods.size() && i < grace_seconds.size(); ++i) {
    if (e.longest_grace_pod.empty() || grace_seconds[i] > e.longest_grace_seconds) {
      e.longest_grace_seconds = grace_seconds[i];
      e.longest_grace_pod = pods[i];
    }
  }
  e.total = std::chrono::seconds(e.longest_grace_seconds) + kMeasuredOverhead;
  return e;
}

namespace {

// An int-or-string field: its text ("3", "25%"), or an error naming it.
Result<std::string> int_or_string(const Json& v, const std::string& field) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return Error(fmt::format("{} is neither a number nor a string: {}", field, v.dump()));
}

}  // namespace

Result<UpgradePolicy> upgrade_policy_from(const std::vector<Json>& items) {
  UpgradePolicy p;
  if (items.empty()) {
    p.source = "no ClusterPolicy in the cluster: the chart's defaults";
    return p;
  }
  const Json& cp = items.front();
  const std::string name = kube::name(cp);
  const Json* policy = kube::find(cp, {"spec", "driver", "upgradePolicy"});
  if (policy == nullptr || !policy->is_object()) {
    p.source = "ClusterPolicy " + name + " has no driver.upgradePolicy: the chart's defaults";
    return p;
  }
  const std::string where = "ClusterPolicy " + name + " spec.driver.upgradePolicy";
  if (policy->contains("autoUpgrade")) {
    if (!(*policy)["autoUpgrade"].is_boolean()) return Error(where + ".autoUpgrade is not a boolean");
    p.auto_upgrade = (*policy)["autoUpgrade"].get<bool>();
  }
  if (policy->contains("maxParallelUpgrades")) {
    const Json& v = (*policy)["maxParallelUpgrades"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return Error(where + ".maxParallelUpgrades is not a number >= 0: " + v.dump());
    p.max_parallel_upgrades = v.get<int64_t>();
  }
  if (policy->contains("maxUnavailable")) {
    auto v = int_or_string((*policy)["maxUnavailable"], where + ".maxUnavailable");
    if (!v) return v.error();
    p.max_unavailable = *v;
  }
  p.source =
      where + (items.size() > 1 ? fmt::format(" (the first of {} ClusterPolicies)", items.size()) : "");
  return p;
}

Result<int64_t> resolve_max_unavailable(const std::string& value, int64_t nodes) {
  const bool percent = !value.empty() && value.back() == '%';
  const std::string digits = percent ? value.substr(0, value.size() - 1) : value;
  const bool ok = !digits.empty() && digits.size() <= 9 &&
                  std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!ok) return Error("maxUnavailable \"" + value + "\" is neither a number of nodes nor a percentage");
  const int64_t n = std::stoll(digits);
  if (!percent) return n;
  return (n * nodes + 99) / 100;  // rounded up
}

Result<Parallelism> wave_parallelism(const UpgradePolicy& policy, int64_t nodes) {
  auto unavailable = resolve_max_unavailable(policy.max_unavailable, nodes);
  if (!unavailable) return unavailable.error();
  Parallelism p;
  const int64_t parallel = policy.max_parallel_upgrades == 0 ? nodes : policy.max_parallel_upgrades;
  p.nodes_at_once = std::min(parallel, *unavailable);
  p.note = fmt::format("maxParallelUpgrades {}{}, maxUnavailable {} = {} of {} node(s)",
                       policy.max_parallel_upgrades, policy.max_parallel_upgrades == 0 ? " (no limit)" : "",
                       policy.max_unavailable, *unavailable, nodes);
  if (p.nodes_at_once < 1) {
    p.nodes_at_once = 1;
    p.note += ": no node may be taken out, so the upgrade controller would not start; estimated as 1 at once";
  }
  return p;
}

WaveEstimate estimate_wave(const std::vector<milliseconds>& node_times, int64_t at_once) {
  WaveEstimate w;
  if (node_times.empty() || at_once < 1) return w;
  std::vector<milliseconds> times = node_times;
  std::sort(times.begin(), times.end(), std::greater<>());
  // The time each slot frees, earliest on top.
  std::priority_queue<milliseconds, std::vector<milliseconds>, std::greater<>> slots;
  const auto width = static_cast<size_t>(std::min<int64_t>(at_once, static_cast<int64_t>(times.size())));
  for (size_t i = 0; i < width; ++i) slots.push(milliseconds{0});
  for (const auto t : times) {
    const milliseconds start = slots.top();
    slots.pop();
    slots.push(start + t);
    w.total = std::max(w.total, start + t);
  }
  const auto n = static_cast<int64_t>(times.size());
  w.rounds = (n + at_once - 1) / at_once;
  return w;
}

std::string human_duration(milliseconds d) {
  return format_duration(d, DurationStyle::kRoundedTenths);
}

}  // namespace dm::manager
