// `plan`'s ledger of the node's pods: each step of the plan takes the pods it handles, in the order the run's
// steps see them; a pod no step takes is `ignored` with the most telling reason seen.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "manager/plan/report.h"

namespace dm::manager {

class PodLedger {
 public:
  explicit PodLedger(const std::vector<nlohmann::json>& pods);
  // The pods not yet taken by an earlier step, in the node's order.
  [[nodiscard]] std::vector<nlohmann::json> remaining() const;
  // Takes a pod (the first step to take it keeps it).
  void decide(PlanPod pod);
  // How telling a skip reason is: a strong one (the pod is a GPU client) replaces a weak one.
  enum class Weight { kWeak, kStrong };
  // A reason for a pod no step takes (the most telling skip seen: a strong one wins), kept until the end.
  void note_skip(const std::string& ref, const std::string& reason, Weight weight);
  // Every pod, the untaken ones `ignored` with their reason, or `default_reason`.
  [[nodiscard]] std::vector<PlanPod> finish(const std::string& default_reason) const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, nlohmann::json> pods_;
  std::map<std::string, PlanPod> decided_;
  std::map<std::string, std::string> skip_reason_;
  std::set<std::string> strong_;
};

}  // namespace dm::manager
