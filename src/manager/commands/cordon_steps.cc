#include "manager/commands/cordon_steps.h"

#include <string>

namespace dm::manager {

namespace {

// A cordon the uncordon leaves to another controller's quarantine is noted on the list (the run's summary
// says it); the list outlives its actions.
NodeOps::OnKept note_on(UndoList& undo) {
  return [&undo](const std::string& what) { undo.note_kept(what); };
}

}  // namespace

void register_uncordon(UndoList& undo, NodeOps& node, const Settings& settings) {
  if (settings.legacy_uncordon) return;  // the legacy uncordon covers it
  undo.add({.key = "uncordon-ours",
            .name = "uncordon node " + settings.node_name,
            .run = [name = settings.node_name, kept = note_on(undo)](const NodeWriters& with) -> Status {
              if (auto u = with.node.uncordon(NodeOps::Whose::kOurs, kept); !u) {
                return u.error().wrap("failed to uncordon node " + name);
              }
              return ok_status();
            },
            .need = UndoNeed::kOptional,
            .upstream_name = "uncordon node",
            .fold = node.uncordon_fold(NodeOps::Whose::kOurs, note_on(undo))});
}

void register_legacy_uncordon(UndoList& undo, NodeOps& node, const Settings& settings, bool policy_enabled) {
  if (!settings.legacy_uncordon) return;
  if (policy_enabled || !(settings.enable_gpu_pod_eviction || settings.enable_auto_drain)) return;
  undo.add({.key = "uncordon-anyones",
            .name = "uncordon node " + settings.node_name + " (UNCORDON_ALWAYS)",
            .run = [kept = note_on(undo)](const NodeWriters& with) -> Status {
              return with.node.uncordon(NodeOps::Whose::kAnyone, kept);
            },
            .need = UndoNeed::kOptional,
            .upstream_name = "uncordon node",
            .fold = node.uncordon_fold(NodeOps::Whose::kAnyone, note_on(undo))});
}

Status cordon_node(NodeOps& node, UndoList& undo, const Settings& settings, const FirstWrite& first) {
  if (first.cordoned) return ok_status();  // by the run's first write
  auto c = node.cordon();
  if (!c) {
    register_uncordon(undo, node, settings);
    return c.error();
  }
  if (*c != CordonOutcome::kAlreadyCordonedByOther) register_uncordon(undo, node, settings);
  return ok_status();
}

}  // namespace dm::manager
