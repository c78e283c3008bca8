// Parts of a plan decided beside the run's steps (build_plan, build.cc): the host, the own pod, traces of
// earlier runs, and the facts the wave's summary adds up (clients and the taint, DRA claims in use, the
// node's time out).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "manager/plan/inputs.h"
#include "manager/plan/report.h"
#include "manager/rules/operands.h"
#include "manager/rules/taints.h"

namespace dm::manager {

// Traces of earlier runs on the node and what a run now would do with them.
void plan_leftovers(Plan& plan, const PlanInputs& in, const Snapshot& snapshot, LeftoverTaint leftover_taint);
// The host part: read on the node, "on the node only" off it.
void plan_host(Plan& plan, const PlanInputs& in);
// The own pod, as the run's preflight finds it, and whether it tolerates `taint`.
void plan_own_pod(Plan& plan, const PlanInputs& in, const std::optional<kube::Taint>& taint);
// Once the pods are decided: the reset clients against the `effective` taint, the GPU claims held on the
// node, and the node's time out.
void plan_node_facts(Plan& plan, const PlanInputs& in, const std::optional<kube::Taint>& effective);

}  // namespace dm::manager
