// A real node for end-to-end tests: `scripts/node up` (containerd, CNI bridge, kubelet, node-sim in
// kernel-only mode) on start, `scripts/node down` on destruction. See docs/control-plane.md.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/cluster.h"

namespace dm::test {

class RealNode {
 public:
  // Starts the node (sim_root "" = a fresh temporary directory, removed on destruction) and waits until it is
  // Ready. `env` is passed to scripts/node (e.g. NODE_SKIP_DM_IMAGE=1). Throws with the script's stderr.
  RealNode(const TestCluster& cluster, std::string node, std::string sim_root = {},
           const std::map<std::string, std::string>& env = {});
  ~RealNode();
  RealNode(const RealNode&) = delete;
  RealNode& operator=(const RealNode&) = delete;

  [[nodiscard]] const std::string& node() const { return node_; }
  [[nodiscard]] const std::string& sim_root() const { return sim_root_; }
  [[nodiscard]] const std::string& state_dir() const { return state_dir_; }
  // A value of `scripts/node env` (NODE_CONTAINERD_STATE, NODE_MNTNS_PID, NODE_CGROUP_ROOT, ...).
  [[nodiscard]] std::string env(const std::string& key) const;

  // The simulated nvidia module's refcount (nullopt: not loaded).
  [[nodiscard]] std::optional<int> refcnt(const std::string& module = "nvidia") const;
  // The file system types of the mounts at `path` in the node's mount namespace, bottom first.
  [[nodiscard]] std::vector<std::string> mounts_at(const std::string& path) const;
  // Reads a file as the node's processes see it (through its mount namespace); nullopt if absent.
  [[nodiscard]] std::optional<std::string> read_in_node(const std::string& path) const;
  // The host PID of a container's main process, from a pod status containerID ("containerd://<id>").
  [[nodiscard]] std::optional<pid_t> container_pid(const std::string& container_id) const;

  [[nodiscard]] std::string kubelet_log() const;
  [[nodiscard]] std::string node_sim_log() const;
  // Every log file of the node, for failure messages.
  [[nodiscard]] std::string logs_tail(size_t lines = 40) const;

  // scripts/node down; returns its output (stderr) and exit code. Called by the destructor if not before.
  CommandOutput down();

 private:
  std::string node_;
  std::string sim_root_;
  std::string state_dir_;
  std::map<std::string, std::string> env_;
  bool owns_sim_root_ = false;
  bool down_ = false;
};

}  // namespace dm::test
