#include "manager/plan/ledger.h"

#include "kube/objects.h"

namespace dm::manager {

PodLedger::PodLedger(const std::vector<nlohmann::json>& pods) {
  for (const auto& p : pods) {
    order_.push_back(kube::ref_string(p));
    pods_[kube::ref_string(p)] = p;
  }
}

std::vector<nlohmann::json> PodLedger::remaining() const {
  std::vector<nlohmann::json> out;
  for (const auto& ref : order_) {
    if (decided_.count(ref) == 0) out.push_back(pods_.at(ref));
  }
  return out;
}

void PodLedger::decide(PlanPod pod) {
  if (decided_.count(pod.pod) > 0) return;
  decided_[pod.pod] = std::move(pod);
}

void PodLedger::note_skip(const std::string& ref, const std::string& reason, Weight weight) {
  if (reason.empty()) return;
  const bool strong = weight == Weight::kStrong;
  auto it = skip_reason_.find(ref);
  if (it == skip_reason_.end() || (strong && !strong_.count(ref))) {
    skip_reason_[ref] = reason;
    if (strong) strong_.insert(ref);
  }
}

std::vector<PlanPod> PodLedger::finish(const std::string& default_reason) const {
  std::vector<PlanPod> out;
  for (const auto& ref : order_) {
    if (auto it = decided_.find(ref); it != decided_.end()) {
      out.push_back(it->second);
      continue;
    }
    auto r = skip_reason_.find(ref);
    out.push_back(
        {ref, PodAction::kIgnored, "", r != skip_reason_.end() ? r->second : default_reason, {}, {}});
  }
  return out;
}

}  // namespace dm::manager
