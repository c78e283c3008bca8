#include "manager/commands/operand_labels.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "manager/pods/drain.h"
#include "manager/rules/label_pause.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

void OperandLabels::start_from(const nlohmann::json& node) {
  bool malformed = false;
  record_ = paused_record_of(node, &malformed);
  if (malformed) {
    spdlog::warn("Ignoring the unreadable {} annotation of node {}", kPausedLabelsAnnotation,
                 settings_.node_name);
  }
}

bool OperandLabels::read_daemonset_templates(const PodSnapshot& pods, kube::Api& client) {
  if (label_pause(snapshot_, table_).keys.empty()) return false;
  snapshot_.daemonset_templates = daemonset_templates_of(pods, api_pod_facts(client));
  return true;
}

void OperandLabels::record_pause(const nlohmann::json& labels) {
  record_ = merge_paused_record(record_, labels, snapshot_.labels);
}

void OperandLabels::register_restore(UndoList& undo) {
  undo.add({.key = "operand-labels",
            .name = "restore the operand labels of node " + settings_.node_name,
            .run = [this](const NodeWriters& with) { return restore(with.node); },
            .need = UndoNeed::kRequired,
            .upstream_name = "reschedule GPU operator components",
            .fold =
                [this](const nlohmann::json& node, FoldedPatch& part) {
                  part.lines.push_back({.text = kLabelRestoreLine});
                  if (nothing_to_restore()) return;
                  fold_restore(node, part);
                  part.applied.emplace_back([this] { record_.clear(); });
                }});
}

Status OperandLabels::restore(NodeOps& node_ops) {
  spdlog::info("{}", kLabelRestoreLine);
  if (nothing_to_restore()) return ok_status();
  auto node = node_ops.get();
  if (!node) return node.error();
  FoldedPatch part;
  fold_restore(*node, part);
  for (const auto& line : part.lines) {
    if (line.level == FoldedPatch::Level::kWarn)
      spdlog::warn("{}", line.text);
    else
      spdlog::info("{}", line.text);
  }
  const nlohmann::json md = part.body.value("metadata", nlohmann::json::object());
  if (auto s = node_ops.update_labels(md.value("labels", nlohmann::json::object()),
                                      md.value("annotations", nlohmann::json::object()));
      !s)
    return s;
  record_.clear();
  return ok_status();
}

bool OperandLabels::nothing_to_restore() const {
  return !patch_has_labels(restore_patch(snapshot_, table_)) && record_.empty() &&
         empty_operand_labels(snapshot_, table_).empty();
}

// The labels, the record, a warning for each label someone else changed, and a line for each empty operand
// label removed.
void OperandLabels::fold_restore(const nlohmann::json& node, FoldedPatch& part) const {
  const auto decision = restore_patch_if_unchanged(snapshot_, table_, node);
  for (const auto& [key, value] : decision.changed_by_others) {
    part.lines.push_back(
        {.level = FoldedPatch::Level::kWarn,
         .text = fmt::format("Not restoring node label \"{}\": it was changed to \"{}\" during "
                             "the run by someone else",
                             key, value)});
  }
  for (const auto& key : decision.removed_empty) {
    part.lines.push_back(
        {.text = fmt::format("Removing the empty node label \"{}\" (an earlier driver manager "
                             "wrote it; an empty operand label deploys nothing)",
                             key)});
  }
  // The record goes with the restore: once the labels are back (or someone else's), nothing is paused.
  if (has_paused_record(node))
    part.body["metadata"]["annotations"][std::string(kPausedLabelsAnnotation)] = nullptr;
  if (patch_has_labels(decision.patch))
    part.body["metadata"]["labels"] = decision.patch["metadata"]["labels"];
}

}  // namespace dm::manager
