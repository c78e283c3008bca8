// The steps of the uninstall flow that need more than the run's environment: the lease, the GPU-client
// reset, the snapshot, the undo list (docs/behaviour.md walks through each one; the others: env_steps.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <set>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/commands/cordon_steps.h"
#include "manager/commands/env_steps.h"
#include "manager/commands/step_def.h"
#include "manager/commands/uninstall_flow.h"
#include "manager/pods/drain.h"
#include "manager/pods/holders.h"
#include "manager/pods/waits.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

namespace {

constexpr const char* kLabelRestoreLine =
    "Rescheduling all GPU clients on the current node by enabling their component-specific nodeSelector "
    "labels";

}  // namespace

// Which DaemonSet pods the label pause takes off is read from their DaemonSets' templates (label_pause.h):
// read when the pause has a label to take off (false otherwise).
bool Uninstall::read_daemonset_templates() {
  if (label_pause(snapshot_, table_).keys.empty()) return false;
  snapshot_.daemonset_templates = daemonset_templates_of(pods_.snapshot(), api_pod_facts(run_requests_));
  return true;
}

// See docs/behaviour.md, Pausing and restoring operand labels. The operand waits run with the client reset.
Status Uninstall::pause_operands(RunContext& run) {
  spdlog::info(
      "Shutting down all GPU clients on the current node by disabling their component-specific "
      "nodeSelector labels");
  const auto& custom = settings_.node_label_for_gpu_pod_eviction;
  if (!custom.empty() && !snapshot_.value(custom).empty()) {
    spdlog::info("Shutting down GPU clients using node selector label \"{}\"={}", custom,
                 snapshot_.value(custom));
  }
  if (read_daemonset_templates()) {
    gpu_clients_.use_label_pause(std::make_shared<const LabelPause>(label_pause(snapshot_, table_)));
  }
  const auto body = pause_patch(snapshot_, table_);
  if (patch_has_labels(body)) {
    register_legacy_uncordon();
    register_label_restore();  // before the write: a request that timed out may still have been applied
    if (auto s = pause_labels(body["metadata"]["labels"], run.first_write); !s) {
      spdlog::error("Failed to evict GPU operator components, attempting cleanup");
      return s.error();
    }
  }
  return ok_status();
}

// Leftovers of an earlier run that crashed (our taint, our cordon): a path that will unload the driver
// adopts them - they stay on until after the unload, so clients kept away by them cannot come back in
// between - and the other paths undo them now.
Status Uninstall::adopt_leftovers(const nlohmann::json& node, LeftoverTaint taint) {
  if (taint == LeftoverTaint::kKeepUntilUnload) {
    gpu_clients_.adopt_leftover_taint(node);
  } else if (auto h = gpu_clients_.heal_leftover_taint(node); !h) {
    return h.error().wrap("failed to remove the GPU client taint left by an earlier run");
  }
  if (!cordoned_by_us(node)) return ok_status();
  if (snapshot_.policy_enabled()) {
    // The upgrade controller owns the cordon while its policy is on: uncordoning would pull the node out
    // from under it. Only our claim on the cordon goes.
    spdlog::info(
        "Node {} carries the {} annotation of an earlier run, but the GPU Operator's upgrade policy is on "
        "and owns the cordon: dropping the annotation, leaving the node's schedulability to the upgrade "
        "controller",
        settings_.node_name, kCordonedAnnotation);
    return node_.drop_cordon_annotation();
  }
  spdlog::info(
      "Node {} was cordoned by an earlier run of driver-manager ({}); it will be uncordoned at the end",
      settings_.node_name, kCordonedAnnotation);
  register_uncordon(undo_, node_, settings_);
  return ok_status();
}

// UNCORDON_ALWAYS: upstream's rule, uncordon whoever cordoned the node when eviction or drain is enabled.
void Uninstall::register_legacy_uncordon() {
  if (!settings_.legacy_uncordon) return;
  if (snapshot_.policy_enabled() || !(settings_.enable_gpu_pod_eviction || settings_.enable_auto_drain))
    return;
  undo_.add(
      {.key = "uncordon-anyones",
       .name = "uncordon node " + settings_.node_name + " (UNCORDON_ALWAYS)",
       .run = [](const NodeWriters& with) -> Status { return with.node.uncordon(NodeOps::Whose::kAnyone); },
       .need = UndoNeed::kOptional,
       .upstream_name = "uncordon node",
       .fold = node_.uncordon_fold(NodeOps::Whose::kAnyone)});
}

void Uninstall::register_label_restore() {
  undo_.add({.key = "operand-labels",
             .name = "restore the operand labels of node " + settings_.node_name,
             .run = [this](const NodeWriters& with) { return restore_labels(with.node); },
             .need = UndoNeed::kRequired,
             .upstream_name = "reschedule GPU operator components",
             .fold =
                 [this](const nlohmann::json& node, FoldedPatch& part) {
                   part.lines.push_back({.text = kLabelRestoreLine});
                   if (nothing_to_restore()) return;
                   fold_label_restore(node, part);
                   part.applied.emplace_back([this] { paused_record_.clear(); });
                 }});
}

// The DRA kubelet plugin goes last (docs/behaviour.md, DRA claims).
Status Uninstall::pause_dra_plugin(RunContext& run) {
  spdlog::info("Draining the DRA kubelet-plugin (last, after its claim-holding clients)");
  const auto body = plugin_patch(snapshot_, table_);
  if (patch_has_labels(body)) {
    register_label_restore();
    if (auto s = pause_labels(body["metadata"]["labels"], run.first_write); !s) return s.error();
  }
  return wait_for_operands(pods_, plugin_waits(snapshot_, table_), settings_.operator_namespace,
                           operand_wait_deadline(ctx_), cancel_);
}

// Pauses `labels` and records, in the same patch, what they were before (see paused_record.h); the
// run's first write when the lease is still to be taken (first_write()).
Status Uninstall::pause_labels(const nlohmann::json& labels, FirstWrite& first) {
  paused_record_ = merge_paused_record(paused_record_, labels, snapshot_.labels);
  if (first.lease_pending) return first_write(labels, first);
  nlohmann::json annotations = {{std::string(kPausedLabelsAnnotation), paused_record_value(paused_record_)}};
  if (auto state = reporter_.ride_along_state()) annotations[std::string(kStateAnnotation)] = *state;
  auto s = node_.update_labels(labels, annotations);
  if (!s) return s;
  reporter_.progress().add_paused_labels(labels.size());
  reporter_.carried();
  return s;
}

// Puts back the operand labels that are still at the value this run paused them to (or that a crashed run
// left paused); a label the operator or an admin changed in the meantime is theirs and left alone.
Status Uninstall::restore_labels(NodeOps& node_ops) {
  spdlog::info("{}", kLabelRestoreLine);
  if (nothing_to_restore()) return ok_status();
  auto node = node_ops.get();
  if (!node) return node.error();
  FoldedPatch part;
  fold_label_restore(*node, part);
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
  paused_record_.clear();
  return ok_status();
}

bool Uninstall::nothing_to_restore() const {
  return !patch_has_labels(restore_patch(snapshot_, table_)) && paused_record_.empty() &&
         empty_operand_labels(snapshot_, table_).empty();
}

// The label restore's part of a node write, decided from `node`: the labels, the record, a warning for each
// label someone else changed, and a line for each empty operand label removed.
void Uninstall::fold_label_restore(const nlohmann::json& node, FoldedPatch& part) const {
  const auto plan = restore_patch_if_unchanged(snapshot_, table_, node);
  for (const auto& [key, value] : plan.changed_by_others) {
    part.lines.push_back(
        {.level = FoldedPatch::Level::kWarn,
         .text = fmt::format("Not restoring node label \"{}\": it was changed to \"{}\" during "
                             "the run by someone else",
                             key, value)});
  }
  for (const auto& key : plan.removed_empty) {
    part.lines.push_back(
        {.text = fmt::format("Removing the empty node label \"{}\" (an earlier driver manager "
                             "wrote it; an empty operand label deploys nothing)",
                             key)});
  }
  // The record goes with the restore: once the labels are back (or someone else's), nothing is paused.
  if (has_paused_record(node))
    part.body["metadata"]["annotations"][std::string(kPausedLabelsAnnotation)] = nullptr;
  if (patch_has_labels(plan.patch)) part.body["metadata"]["labels"] = plan.patch["metadata"]["labels"];
}

// The rows of the steps above (step_def.h).

const StepDef& pause_operands_step() {
  static constexpr StepDef kDef{.step = Step::kPauseOperands,
                                .name = "pause-operands",
                                .run = [](StepCall& c) { return c.flow.pause_operands(c.run); },
                                .carries_first_write = true,
                                .render = [](StepPlan& plan) { plan.pause_operands(); }};
  return kDef;
}

const StepDef& pause_dra_plugin_step() {
  static constexpr StepDef kDef{
      .step = Step::kPauseDraPlugin,
      .name = "pause-dra-plugin",
      .taken = [](const FlowFacts& f, bool /*evict_workloads*/) { return f.dra_on; },
      .run = [](StepCall& c) { return c.flow.pause_dra_plugin(c.run); },
      .render = [](StepPlan& plan) { plan.pause_dra_plugin(); }};
  return kDef;
}

}  // namespace dm::manager
