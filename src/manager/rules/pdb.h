// Which PodDisruptionBudgets would hold up the evictions of a run: the API server decides at eviction time
// (429), so this is a reading of the budgets' current status for `plan`, not a rule the flow applies.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "manager/rules/label_selector.h"

namespace dm::manager {

// A PodDisruptionBudget's spec.selector as a LabelSelector; nullopt when it selects no pod (no selector, or
// an empty one in policy/v1beta1, where an empty selector matches nothing) or cannot be read.
std::optional<LabelSelector> pdb_selector(const nlohmann::json& pdb, const std::string& api_version);

struct PdbImpact {
  std::string pdb;                // namespace/name
  std::vector<std::string> pods;  // the pods to evict that it covers (namespace/name)
  int64_t disruptions_allowed = 0;
  bool blocks = false;  // allows fewer disruptions than it covers pods to evict
  std::string why;      // one line: allowance and status
};

// The budgets (items of a PDB list in `api_version`) covering at least one of `pods_to_evict`.
std::vector<PdbImpact> pdb_impacts(const std::vector<nlohmann::json>& pdbs, const std::string& api_version,
                                   const std::vector<nlohmann::json>& pods_to_evict);

}  // namespace dm::manager
