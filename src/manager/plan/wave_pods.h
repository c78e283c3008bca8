// The pods of a wave's nodes, kept compact until their node is planned. A cluster-wide plan reads every pod
// of the cluster before it plans the first node (a list is ordered by name, not by node), so what it keeps
// per pod decides its memory: a parsed pod object takes about ten times its text. Each reduced pod is
// therefore held as its MessagePack encoding under its node and parsed again only for that node's plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dm::manager {

class WavePods {
 public:
  // Keeps `pod` under its node (spec.nodeName). A pod added again (same namespace and name: a list that was
  // started over) replaces the one kept.
  void add(const nlohmann::json& pod);
  // The pods kept for `node`, parsed again (ordered by namespace/name).
  [[nodiscard]] std::vector<nlohmann::json> of(const std::string& node) const;
  // The same, and no longer kept: a wave frees each node's pods as it plans the node.
  std::vector<nlohmann::json> take(const std::string& node);
  // Every pod kept, for tests and reports.
  [[nodiscard]] std::vector<nlohmann::json> all() const;
  [[nodiscard]] size_t size() const { return count_; }
  // The bytes the encoded pods take (their text, not the containers around it).
  [[nodiscard]] size_t encoded_bytes() const { return bytes_; }

 private:
  std::map<std::string, std::map<std::string, std::vector<std::uint8_t>>> by_node_;  // node -> ref -> pod
  size_t count_ = 0;
  size_t bytes_ = 0;
};

}  // namespace dm::manager
