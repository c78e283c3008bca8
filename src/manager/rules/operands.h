// The one table of GPU Operator operands (docs/behaviour.md, Pausing and restoring operand labels): label
// key, pod selector, batch membership and waits. Snapshot, pause/plugin/restore patch bodies and the wait
// list are all derived from it; adding an operand is one row in operands.cc.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "manager/rules/label_pause.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

// app=<this> pods in the operator namespace are the DRA kubelet plugin (waited for after the plugin batch).
inline constexpr std::string_view kDraPluginApp = "nvidia-dra-driver-kubelet-plugin";

// When a row takes part in a batch or a wait.
enum class Inclusion {
  kAlways,         // upstream always includes it (our write policy still skips empty snapshots)
  kIfSnapshotSet,  // only if the row's snapshot value is non-empty
  kNever,
};

// Which label patch a row belongs to.
enum class Batch {
  kPause,   // the pause batch and the restore batch
  kPlugin,  // the DRA plugin batch (dra-driver): paused last, restored with the rest
};

// How a row's pods are waited for after its label was paused.
enum class WaitKind {
  kNone,
  kAppLabel,                 // pods app=<app> on the node in the operator namespace
  kDaemonSetNodeSelectorKey  // DaemonSet-owned pods on the node that pausing label_key takes off
                             // (label_pause.h)
};

// One operand (one node label).
struct OperandSpec {
  std::string label_key;  // full node label key
  Batch batch = Batch::kPause;
  Inclusion in_batch = Inclusion::kAlways;
  WaitKind wait_kind = WaitKind::kNone;
  std::string app;  // for kAppLabel
  // The operand's name in the "Waiting for <name> to shutdown" lines: upstream calls the optional
  // operands by their short name (mig-manager, dra-driver, ...) and the others by their app label.
  std::string log_name;
  Inclusion wait = Inclusion::kNever;
  int wait_order = 0;  // upstream's wait sequence (smaller first)
};

// Upstream's 16 rows in snapshot order, then a row for `custom_label_key` (NODE_LABEL_FOR_GPU_POD_EVICTION,
// already stripped of any "=value") if non-empty: paused if set, its DaemonSet pods waited for (upstream
// never waited for them).
std::vector<OperandSpec> operand_table(std::string_view custom_label_key = {});

// The node's values of every table key ("" if absent) plus the upgrade-policy annotation: read from ONE
// node GET and never re-read (docs/behaviour.md, Snapshot).
struct Snapshot {
  std::map<std::string, std::string> labels;       // every table key, "" when absent
  std::string upgrade_annotation;                  // nvidia.com/gpu-driver-upgrade-enabled, "" when absent
  std::string node_name;                           // for matchFields on metadata.name
  std::map<std::string, std::string> node_labels;  // all of the node's labels, for pod placement
  // The pod templates of the DaemonSets of the node's pods (filled by the caller that may read them):
  // where the label pause reads a DaemonSet pod's placement (label_pause.h).
  DaemonSetTemplates daemonset_templates;

  // The snapshot value of `key` ("" when not a table key or absent).
  [[nodiscard]] std::string value(std::string_view key) const;
  // Auto-upgrade policy on <=> annotation is exactly "true".
  [[nodiscard]] bool policy_enabled() const { return upgrade_annotation == "true"; }
  // DRA driver deployed <=> dra-driver snapshot non-empty.
  [[nodiscard]] bool dra_on() const { return !value(kDraDriverLabel).empty(); }
};

// Reads the snapshot from a Node object (JSON as returned by GET /api/v1/nodes/<name>).
Snapshot take_snapshot(const nlohmann::json& node, const std::vector<OperandSpec>& table);

// The strategic-merge body {"metadata":{"labels":{...}}} pausing the pause-batch rows with
// non-empty snapshots. labels may be empty: then the caller sends nothing (see patch_has_labels).
nlohmann::json pause_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table);
// The plugin batch: dra-driver paused, only if its snapshot is non-empty.
nlohmann::json plugin_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table);
// The restore batch: every row (pause and plugin) with a non-empty snapshot, value restore_value(snapshot).
nlohmann::json restore_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table);
// The table's nvidia.com/gpu.deploy.* keys the node had with an empty value when the snapshot was taken:
// upstream's leftovers (it writes an absent operand label as ""), which deploy nothing and keep the
// operator from labelling the key itself. Never written by this program.
std::vector<std::string> empty_operand_labels(const Snapshot& snapshot,
                                              const std::vector<OperandSpec>& table);
// The restore batch limited to the labels still at the value the pause wrote (pause_value of the snapshot);
// labels already back at their restore value are left out, and labels someone else changed while they were
// paused are left alone and reported. The empty_operand_labels() still empty on current_node are removed
// (null) in the same patch.
struct RestoreDecision {
  nlohmann::json patch;  // as restore_patch, possibly without labels, plus the removals
  std::vector<std::pair<std::string, std::string>> changed_by_others;  // key, current value ("" = absent)
  std::vector<std::string> removed_empty;                              // the empty labels the patch removes
};
RestoreDecision restore_patch_if_unchanged(const Snapshot& snapshot, const std::vector<OperandSpec>& table,
                                           const nlohmann::json& current_node);
// True if a patch body from the functions above has at least one label to write.
bool patch_has_labels(const nlohmann::json& patch);

// The node before and after the pause batch, and the keys whose DaemonSet pods the run waits for (the
// table's kDaemonSetNodeSelectorKey rows whose wait is included).
LabelPause label_pause(const Snapshot& snapshot, const std::vector<OperandSpec>& table);

// One thing to wait for after a label batch: no pods left matching.
struct OperandWait {
  WaitKind kind = WaitKind::kAppLabel;
  std::string app;                // kAppLabel: pods app=<app> in the operator namespace on the node
  std::string node_selector_key;  // kDaemonSetNodeSelectorKey: DaemonSet pods on the node (all namespaces)
  std::shared_ptr<const LabelPause> pause;  // kDaemonSetNodeSelectorKey: which pods the pause takes off
  std::string log_name;                     // kAppLabel: the name upstream's wait lines use ("" = app)
  // "app=<app>" for kAppLabel (a LIST labelSelector), "" otherwise.
  [[nodiscard]] std::string label_selector() const;
  // What to call it in logs: log_name or the app name, or "daemon set pods with nodeSelector key <k>".
  [[nodiscard]] std::string description() const;
  // Upstream's line when the wait starts, and when it failed with `error`.
  [[nodiscard]] std::string start_line() const;
  [[nodiscard]] std::string failure_line(std::string_view error) const;
};

// The waits after the pause batch (docs/behaviour.md, Operand waits), in upstream's order.
std::vector<OperandWait> pause_waits(const Snapshot& snapshot, const std::vector<OperandSpec>& table);
// The wait after the plugin batch (app=nvidia-dra-driver-kubelet-plugin); empty if dra is off.
std::vector<OperandWait> plugin_waits(const Snapshot& snapshot, const std::vector<OperandSpec>& table);

}  // namespace dm::manager
