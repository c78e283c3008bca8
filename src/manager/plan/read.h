// `plan`'s reads: the node, its pods, the own pod, PodDisruptionBudgets, ResourceClaims and (on the node) the
// host, into PlanInputs.
#pragma once

#include <string>

#include "common/result.h"
#include "host/host.h"
#include "kube/api.h"
#include "manager/plan/inputs.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// Reads the inputs; an error (node or pods not readable) names what was refused and why. Reads that only
// refine the plan (own pod, PDBs) go to the inputs' *_error fields instead. The host is read only when
// plan runs on the node (is_on_node); otherwise its facts are inferred from the API.
Result<PlanInputs> read_plan_inputs(const Settings& settings, kube::Api& client, host::Host& host);

// The reads a node's plan and a wave's share: the cluster's PodDisruptionBudgets (policy/v1, else v1beta1)
// and ResourceClaims (resource.k8s.io/v1; a server without it has none). A refusal goes to the *_error /
// *_note fields.
void read_pdbs(kube::Api& client, PlanInputs& in);
void read_claims(kube::Api& client, PlanInputs& in);
// "<what>: forbidden (<message>)" or "<what>: <message>".
std::string read_error(const std::string& what, const Error& e);
// This machine's hostname ("" when unknown).
std::string machine_hostname();

}  // namespace dm::manager
