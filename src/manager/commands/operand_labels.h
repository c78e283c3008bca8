// The run's operand labels (docs/behaviour.md, Pausing and restoring operand labels): which DaemonSet pods
// pausing them takes off (their templates, read into the run's snapshot), the record on the node of what was
// paused (by this run or a crashed one) and its value before, and the restore registered with the undo
// list. It writes only through the NodeOps it is given: the pause itself is the run's write (it may take the
// lease), RunServices::pause_labels.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "kube/api.h"
#include "manager/node/node_ops.h"
#include "manager/node/undo.h"
#include "manager/pods/pod_watch.h"
#include "manager/rules/operands.h"
#include "manager/rules/paused_record.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// The run's first and the restore's log line.
inline constexpr const char* kLabelRestoreLine =
    "Rescheduling all GPU clients on the current node by enabling their component-specific nodeSelector "
    "labels";

class OperandLabels {
 public:
  // `snapshot` and `table` are the run's, read before any step.
  OperandLabels(const Settings& settings, Snapshot& snapshot, const std::vector<OperandSpec>& table)
      : settings_(settings), snapshot_(snapshot), table_(table) {}

  // The node's operand labels as the lease found them, and the operand table: what the label pause takes
  // off and waits for (pause_waits).
  [[nodiscard]] const Snapshot& snapshot() const { return snapshot_; }
  [[nodiscard]] const std::vector<OperandSpec>& operands() const { return table_; }

  // From the node as the lease found it: the record an earlier run left (an unreadable one is ignored, and
  // said).
  void start_from(const nlohmann::json& node);
  // Reads the templates of the DaemonSets whose pods the pause takes off into the snapshot, when the pause
  // has a label to take off (false otherwise).
  bool read_daemonset_templates(const PodSnapshot& pods, kube::Api& client);
  // `labels` are being paused: the record says what they were before. Its annotation value:
  void record_pause(const nlohmann::json& labels);
  [[nodiscard]] std::string record_value() const { return paused_record_value(record_); }
  // Registers the restore, before the write that pauses (a write that timed out may still be applied).
  void register_restore(UndoList& undo);
  // Puts back the labels that are still at the value this run (or a crashed one) paused them to; a label
  // the operator or an admin changed in the meantime is theirs and left alone.
  Status restore(NodeOps& node);

 private:
  [[nodiscard]] bool nothing_to_restore() const;
  // The restore's part of a node write, decided from `node`.
  void fold_restore(const nlohmann::json& node, FoldedPatch& part) const;

  const Settings& settings_;
  Snapshot& snapshot_;
  const std::vector<OperandSpec>& table_;
  PausedRecord record_;  // on the node: what this run (or a crashed one) paused, value before
};

}  // namespace dm::manager
