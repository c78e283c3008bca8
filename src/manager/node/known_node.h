// The newest copy of this program's Node that a read or a write of it returned. A write guarded by the
// node's resourceVersion may start from this copy instead of reading the node again: when the copy is stale
// the API server refuses the write (409 Conflict) and the writer reads the node. A decision to write
// nothing is never taken on the copy alone (nothing would catch it being stale). The writers that share the
// copy (the run's and the cleanup's NodeOps and TaintOps) share its lock too (guarded_write_lock()).
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

namespace dm::manager {

class KnownNode {
 public:
  // Keeps `node` unless the copy held is newer (a higher resourceVersion; answers to writes sent side by
  // side arrive in any order). A resourceVersion that is not a number replaces the copy.
  void remember(const nlohmann::json& node);
  // The copy, if any.
  [[nodiscard]] std::optional<nlohmann::json> copy() const;
  // Held around each read-then-guarded-write of the node (cordon, taint): the cordon and the taint are
  // written at the same moment, and with each other's resourceVersion in between one of them would meet a
  // conflict and read the node again.
  [[nodiscard]] std::mutex& guarded_write_lock() { return write_mu_; }

 private:
  std::mutex write_mu_;
  mutable std::mutex mu_;
  std::optional<nlohmann::json> node_;
};

}  // namespace dm::manager
