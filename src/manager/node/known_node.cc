#include "manager/node/known_node.h"

#include <charconv>
#include <cstdint>
#include <string>

#include "kube/objects.h"

namespace dm::manager {
namespace {

std::optional<uint64_t> version_number(const nlohmann::json& node) {
  const std::string* rv = kube::find_string(node, {"metadata", "resourceVersion"});
  if (rv == nullptr || rv->empty()) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(rv->data(), rv->data() + rv->size(), v);
  if (ec != std::errc() || end != rv->data() + rv->size()) return std::nullopt;
  return v;
}

}  // namespace

void KnownNode::remember(const nlohmann::json& node) {
  const auto incoming = version_number(node);
  std::lock_guard lk(mu_);
  if (node_ && incoming) {
    const auto held = version_number(*node_);
    if (held && *held > *incoming) return;
  }
  node_ = node;
}

std::optional<nlohmann::json> KnownNode::copy() const {
  std::lock_guard lk(mu_);
  return node_;
}

}  // namespace dm::manager
