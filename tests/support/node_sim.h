// node-sim for integration tests: runs build/bin/node-sim for one Node of a TestCluster in the background
// and reads its simulated kernel (sim_root/sys/module/<m>/refcnt and users).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/cluster.h"
#include "support/process.h"

namespace dm::test {

struct NodeSimOptions {
  int gpus = 8;
  bool no_driver = false;
  std::vector<std::string> extra_args;
  double ready_timeout_s = 60;
};

class NodeSim {
 public:
  // Starts node-sim for `node` (sim_root "" = a fresh temporary directory, removed on destruction) and waits
  // until it has registered the Node, the Node is Ready and (unless no_driver) the module files exist. Throws
  // with node-sim's log on failure.
  NodeSim(const TestCluster& cluster, std::string node, std::string sim_root = {},
          NodeSimOptions options = {});
  ~NodeSim();
  NodeSim(const NodeSim&) = delete;
  NodeSim& operator=(const NodeSim&) = delete;

  [[nodiscard]] const std::string& node() const { return node_; }
  [[nodiscard]] const std::string& sim_root() const { return sim_root_; }
  // sim_root/sys/module/<module>
  [[nodiscard]] std::string module_dir(const std::string& module = "nvidia") const;
  // The module's refcount, or nullopt if its refcnt file does not exist (not loaded).
  [[nodiscard]] std::optional<int> refcnt(const std::string& module = "nvidia") const;
  // The "ns/name" lines of the module's users file (empty if absent).
  [[nodiscard]] std::vector<std::string> users(const std::string& module = "nvidia") const;
  // node-sim's output so far.
  [[nodiscard]] std::string log() const;
  [[nodiscard]] bool running();
  // SIGTERM, then waits; returns the exit code (128+N if killed by signal N, -1 if it did not exit in time).
  int stop(double timeout_s = 20);

 private:
  std::string node_;
  std::string sim_root_;
  std::unique_ptr<BackgroundProcess> process_;
  int exit_code_ = -1;
  bool owns_sim_root_ = false;
};

}  // namespace dm::test
