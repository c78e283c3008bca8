// The wait for the DRA driver's helper pods (docs/behaviour.md, DRA driver helpers): once the GPU workloads
// are gone, the DRA kubelet plugin, still running, unprepares their claims and takes off the ComputeDomain
// and MPS control daemons that served them; the run waits for that, never evicts them, and names what keeps
// one that stays.
#pragma once

#include "common/result.h"
#include "manager/pods/drain.h"

namespace dm::manager {

// Logs each helper on the node (one line per pod: what it is and how it leaves) and each odd shape, then
// waits until every helper that was there is gone, under OPERAND_WAIT_TIMEOUT. On timeout it fails naming
// each helper left and what keeps it (its ComputeDomain's node label, its claim and the pods holding it).
Status await_dra_helpers(const DrainContext& ctx);

}  // namespace dm::manager
