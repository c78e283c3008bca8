// The run's node writes that carry several changes at once (NodeOps::write_folded): the first one, which
// takes the lease with the label pause, the cordon and the GPU client taint, and the last one, which undoes
// the run's changes and releases the lease (docs/behaviour.md, One run per node and The undo list).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "kube/objects.h"
#include "manager/commands/cordon_steps.h"
#include "manager/commands/step_def.h"
#include "manager/commands/uninstall_flow.h"

namespace dm::manager {

// The lease is taken by the first write, with what is due then, on the paths that pause labels first; the
// others, and a leftover that takes a write of its own, take it now. Returns the node as read then.
Result<nlohmann::json> Uninstall::wait_for_lease(const nlohmann::json& node) {
  lease_.emplace(
      run_requests_, clock_, settings_.node_name,
      lease_holder_identity(run_.own_pod.pod ? run_.own_pod.pod->ref : own_pod_name(), settings_.hostname));
  lease_->set_renewal_rider(reporter_.renewal_rider());  // a long wait's progress goes with the renewals
  const bool defer = host_.module_loaded("nvidia") && !(cordoned_by_us(node) && snapshot_.policy_enabled());
  auto leased = defer ? lease_->wait_until_free(cancel_, &node) : lease_->acquire(cancel_, &node);
  run_.first_write.lease_pending = defer && leased;
  return leased;
}

// The first write of a path that pauses labels takes the lease with them, with their record and the
// state, with the cordon when this run cordons, and with the GPU client taint when the client reset that
// follows would add it (docs/behaviour.md, One run per node). Until it is
// applied, nothing of this run is on the node: a refused or failed first write leaves nothing to undo.
Status Uninstall::first_write(const nlohmann::json& labels, FirstWrite& first) {
  first.lease_pending = false;
  std::vector<NodeFold> folds{lease_->take_fold()};
  nlohmann::json annotations = nlohmann::json::object();
  if (!labels.empty()) annotations[std::string(kPausedLabelsAnnotation)] = labels_.record_value();
  if (auto state = reporter_.ride_along_state()) annotations[std::string(kStateAnnotation)] = *state;
  folds.emplace_back([&labels, &annotations](const nlohmann::json&, FoldedPatch& part) {
    if (!labels.empty()) part.body["metadata"]["labels"] = labels;
    if (!annotations.empty()) part.body["metadata"]["annotations"] = annotations;
  });
  if (flow_.evict_workloads && !snapshot_.policy_enabled()) {
    folds.emplace_back([this, &first](const nlohmann::json& node, FoldedPatch& part) {
      if (kube::node_unschedulable(node)) return;  // the cordon step decides, on a fresh read
      register_uncordon(undo_, node_, settings_);  // before the write: it may be applied without an answer
      part.lines.push_back({.text = "Cordoning node " + settings_.node_name});
      part.body["spec"]["unschedulable"] = true;
      part.body["metadata"]["annotations"][std::string(kCordonedAnnotation)] = "true";
      part.applied.emplace_back([&first] { first.cordoned = true; });
    });
  }
  if (taints_with_first_write()) folds.push_back(gpu_clients_.taint_fold());
  const auto seen = known_node_.copy();
  bool maybe_applied = false;
  auto s = node_.write_folded(folds, "labels and lease", seen ? &*seen : nullptr, &maybe_applied);
  const bool maybe = !s && (maybe_applied || s.error().cancelled());
  lease_->first_write_done(s       ? NodeLease::WriteOutcome::kApplied
                           : maybe ? NodeLease::WriteOutcome::kMaybeApplied
                                   : NodeLease::WriteOutcome::kNotApplied);
  if (!s && !maybe) undo_.clear();  // nothing was changed: the registrations made for it go
  first.unsure = maybe;
  if (!s) return s;
  if (!labels.empty()) reporter_.progress().add_paused_labels(labels.size());
  reporter_.carried();
  return s;
}

// The client reset that follows the first write would taint the node at once (its first look, taken now
// over the pod watch): the taint goes with that write, one write fewer. A taint the own pod does not
// tolerate is left to the reset, which refuses it; one needed only later (a client bound after this look,
// a DRA plugin client) is a write of its own, as before.
bool Uninstall::taints_with_first_write() const {
  if (run_.own_pod.taint_refusal) return false;
  const bool resets = std::any_of(flow_.steps.begin(), flow_.steps.end(),
                                  [](const auto& planned) { return planned.step == Step::kTakeGpuUsersOff; });
  return resets && gpu_clients_.reset_will_taint();
}

void Uninstall::forget_changes_not_made(NodeOps& node_ops) {
  if (run_.first_write.lease_pending) {
    // No write yet: leftovers of an earlier run adopted meanwhile stay for the next run, as after a crash.
    undo_.clear();
    return;
  }
  if (!run_.first_write.unsure) return;
  auto node = node_ops.get();
  if (!node) return;  // unknown: the undo list runs (each action touches only what carries our marks)
  const auto lease = lease_of(*node);
  if (lease && lease->holder == lease_->holder()) return;
  spdlog::info("The first write of this run did not reach node {}: nothing to restore", settings_.node_name);
  undo_.clear();
}

// The lease on its own, before a step other than the label pause writes or acts on the node.
Status Uninstall::take_lease_if_pending(FirstWrite& first) {
  if (!first.lease_pending) return ok_status();
  return first_write(nlohmann::json::object(), first);
}

// One write ends a successful run: every undo and the lease release, with the state annotation (no state
// write may land after it). When a change can only be undone on its own, or that write fails, each change
// is undone on its own, and the lease released after them.
Status Uninstall::undo_changes() {
  reporter_.stop();
  std::optional<NodeFold> release;
  if (lease_) release = lease_->release_fold({std::string(kStateAnnotation)});
  auto folded = undo_.run_folded([&](std::vector<NodeFold> folds) {
    if (release) folds.push_back(*release);
    return node_.write_folded(folds, "labels, cordon, taint and lease");
  });
  if (lease_) lease_->folded_release_done(folded && *folded);
  if (folded && *folded) return ok_status();
  if (!folded && cancel_.cancelled()) return folded.error();
  if (!folded) spdlog::warn("{}; undoing each change on its own", folded.error().message);
  return undo_.run_all(run_writers(), cancel_);
}

// The rows of the steps that end a path by putting the node back (step_def.h).

// The taint, the cordon and the labels come back, newest change first.
const StepDef& undo_changes_step() {
  static constexpr StepDef kDef{
      .step = Step::kUndoChanges,
      .name = "undo-changes",
      .run = [](StepCall& c) { return c.services.undo_changes(); },
      .render =
          [](StepPlan& plan) {
            const RunPath path = plan.flow().path;
            if (path == RunPath::kFull)
              plan.line("remove the taint, uncordon (if ours), restore the operand labels");
            if (path == RunPath::kSkip) plan.line("restore the labels, remove the taint, undo our cordon");
          }};
  return kDef;
}

}  // namespace dm::manager
