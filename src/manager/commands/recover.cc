#include "manager/commands/recover.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "kube/config.h"
#include "manager/commands/command.h"
#include "manager/node/lease.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/rules/node_keys.h"
#include "manager/rules/paused_record.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

bool has_annotation(const Json& node, std::string_view key) {
  return node.contains("metadata") && node["metadata"].contains("annotations") &&
         node["metadata"]["annotations"].is_object() &&
         node["metadata"]["annotations"].contains(std::string(key));
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// A run in progress owns its taint, cordon and paused labels: undoing them under it would let GPU clients
// back onto a node whose driver is being unloaded. With --force it is only a warning.
Status check_live_lease(const Json& node, const Clock& clock, const std::string& node_name,
                        LiveLease live_lease) {
  const auto now = clock.wall_now();
  auto lease = lease_of(node);
  if (!lease || lease->expired(now)) return ok_status();
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(lease->renewed + lease->duration - now);
  if (live_lease == LiveLease::kRefuse) {
    return Error("node " + node_name + " is held by a run of driver-manager in progress (" + lease->holder +
                 ", lease valid for " + std::to_string(left.count()) +
                 " s more): let it finish, or if that run is gone (e.g. its pod was deleted), wait for the "
                 "lease to lapse or pass --force");
  }
  spdlog::warn("Node {} is held by {} (lease valid for {} s more): --force, recovering anyway", node_name,
               lease->holder, left.count());
  return ok_status();
}

// The labels recorded as paused, in one patch with the removal of the record (and of the run's state and
// lease), read afresh.
Status restore_paused_labels(NodeOps& node_ops, const std::string& node_name, RecoverReport& report) {
  auto fresh = node_ops.get();
  if (!fresh) return fresh.error();
  bool malformed = false;
  const PausedRecord record = paused_record_of(*fresh, &malformed);
  if (malformed) {
    spdlog::warn("The {} annotation of node {} is unreadable: removing it, restoring no label",
                 kPausedLabelsAnnotation, node_name);
    report.left.push_back("labels of an unreadable " + std::string(kPausedLabelsAnnotation) + " annotation");
  }
  Json annotations = Json::object();
  if (has_paused_record(*fresh)) annotations[std::string(kPausedLabelsAnnotation)] = nullptr;
  if (has_annotation(*fresh, kStateAnnotation)) annotations[std::string(kStateAnnotation)] = nullptr;
  if (has_annotation(*fresh, kLeaseAnnotation)) annotations[std::string(kLeaseAnnotation)] = nullptr;
  const auto decision = decide_record_restore(record, *fresh);
  for (const auto& [key, value] : decision.changed_by_others) {
    spdlog::warn("Not restoring node label \"{}\": it is now \"{}\", set by someone else since the pause",
                 key, value);
    report.left.push_back(fmt::format("label {}={} (changed by someone else)", key, value));
  }
  for (const auto& [key, value] : decision.labels.items()) {
    spdlog::info("Restoring node label \"{}\"={} (paused by driver-manager)", key, value.get<std::string>());
    report.done.push_back(fmt::format("restored label {}={}", key, value.get<std::string>()));
  }
  if (!annotations.empty() || !decision.labels.empty()) {
    if (auto s = node_ops.update_labels(decision.labels, annotations); !s) return s;
  }
  if (annotations.contains(std::string(kLeaseAnnotation))) report.done.emplace_back("removed the lease");
  return ok_status();
}

}  // namespace

Result<RecoverReport> recover_node(kube::Api& client, const Clock& clock, const std::string& node_name,
                                   LiveLease live_lease) {
  RecoverReport report;
  NodeOps node_ops(client, clock, CancelToken{}, node_name);
  auto node = node_ops.get();
  if (!node) return node.error();

  // Not under a run in progress.
  if (auto l = check_live_lease(*node, clock, node_name, live_lease); !l) return l.error();

  // The taint our annotation names, and only that one.
  TaintOps taints(client, clock, CancelToken{}, node_name);
  auto removed = taints.remove_ours(&*node);
  if (!removed) return removed.error();
  if (*removed) report.done.push_back("removed taint " + (*removed)->to_string());

  // The cordon, if ours and not claimed since by another controller's quarantine or maintenance.
  {
    const bool ours = cordoned_by_us(*node);
    const bool cordoned = node->contains("spec") && (*node)["spec"].value("unschedulable", false);
    std::optional<std::string> kept;
    if (auto u = node_ops.uncordon(NodeOps::Whose::kOurs, [&kept](const std::string& what) { kept = what; });
        !u) {
      return u.error();
    }
    if (kept) report.left.push_back(*kept);
    if (ours && cordoned && !kept) report.done.emplace_back("uncordoned");
    if (!ours && cordoned) report.left.emplace_back("cordon (not made by driver-manager)");
  }

  if (auto r = restore_paused_labels(node_ops, node_name, report); !r) return r.error();
  return report;
}

int run_recover(const Settings& settings, LiveLease live_lease) {
  if (!require_node_name(settings, "the name of the node to recover")) return 1;
  SystemClock clock;
  auto connection = connect(settings, restart_tolerant_options(clock));  // like uninstall_driver
  if (!connection) return 1;
  spdlog::info("Recovering node {} from what an interrupted run of driver-manager left", settings.node_name);
  auto report = recover_node(*connection->client, clock, settings.node_name, live_lease);
  if (!report) {
    spdlog::critical("recover failed: {}", report.error().message);
    return 1;
  }
  if (report->done.empty() && report->left.empty()) {
    spdlog::info("Nothing to recover on node {}: no taint, cordon, paused labels or lease of driver-manager",
                 settings.node_name);
  } else if (!report->done.empty()) {
    spdlog::info("Recovered node {}: {}", settings.node_name, join(report->done));
  }
  if (!report->left.empty())
    spdlog::info("Left alone on node {}: {}", settings.node_name, join(report->left));
  return 0;
}

}  // namespace dm::manager
