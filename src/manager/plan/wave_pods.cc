#include "manager/plan/wave_pods.h"

#include "kube/objects.h"

namespace dm::manager {

void WavePods::add(const nlohmann::json& pod) {
  auto encoded = nlohmann::json::to_msgpack(pod);
  encoded.shrink_to_fit();  // the encoder grows its buffer by doubling: up to twice the bytes otherwise
  auto& kept = by_node_[kube::pod_node_name(pod)][kube::ref_string(pod)];
  if (kept.empty()) {
    ++count_;
  } else {
    bytes_ -= kept.size();
  }
  bytes_ += encoded.size();
  kept = std::move(encoded);
}

std::vector<nlohmann::json> WavePods::of(const std::string& node) const {
  std::vector<nlohmann::json> out;
  const auto it = by_node_.find(node);
  if (it == by_node_.end()) return out;
  out.reserve(it->second.size());
  for (const auto& [ref, encoded] : it->second) out.push_back(nlohmann::json::from_msgpack(encoded));
  return out;
}

std::vector<nlohmann::json> WavePods::take(const std::string& node) {
  auto out = of(node);
  const auto it = by_node_.find(node);
  if (it == by_node_.end()) return out;
  for (const auto& [ref, encoded] : it->second) bytes_ -= encoded.size();
  count_ -= it->second.size();
  by_node_.erase(it);
  return out;
}

std::vector<nlohmann::json> WavePods::all() const {
  std::vector<nlohmann::json> out;
  out.reserve(count_);
  for (const auto& [node, pods] : by_node_) {
    for (const auto& [ref, encoded] : pods) out.push_back(nlohmann::json::from_msgpack(encoded));
  }
  return out;
}

}  // namespace dm::manager
