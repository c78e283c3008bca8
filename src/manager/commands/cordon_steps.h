// The run's cordon and its undo (docs/behaviour.md, Cordon ownership): shared by the steps that cordon (the
// GPU-workload eviction, the full-drain fallback) and by the adoption of an earlier run's cordon.
#pragma once

#include "common/result.h"
#include "manager/commands/run_context.h"
#include "manager/node/node_ops.h"
#include "manager/node/undo.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// Registers the uncordon of a cordon that carries this program's annotation, unless UNCORDON_ALWAYS is on
// (its uncordon of whoever cordoned the node covers it). Either leaves a cordon that another controller
// has claimed since (NodeOps::uncordon) and notes it on `undo` (UndoList::kept()).
void register_uncordon(UndoList& undo, NodeOps& node, const Settings& settings);
// UNCORDON_ALWAYS: upstream's rule, registers the uncordon of whoever cordoned the node when eviction or
// drain is enabled (not while the GPU Operator's upgrade policy owns the cordon).
void register_legacy_uncordon(UndoList& undo, NodeOps& node, const Settings& settings, bool policy_enabled);
// Cordons the node through `node`, unless the run's first write did, and registers its uncordon: also when
// the write failed (a write cut short may still have been applied; the uncordon only lifts our cordon),
// never when someone else had cordoned the node.
Status cordon_node(NodeOps& node, UndoList& undo, const Settings& settings, const FirstWrite& first);

}  // namespace dm::manager
