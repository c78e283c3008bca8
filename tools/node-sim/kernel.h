// The simulated kernel of one node: DIR/sys/module/<m>/refcnt (decimal + newline) and
// DIR/sys/module/<m>/users ("ns/name" per line) for the NVIDIA modules, the NVIDIA device nodes
// (DIR/dev/nvidia0, DIR/dev/nvidiactl, majors in DIR/proc/devices) and, for each pod holding the GPU, a
// process DIR/proc/<pid>/{comm,cgroup,fd/*} with those devices open and the pod's kubelet cgroup. The
// simulated host of driver-manager reads these files; unloading a module there removes its directory, which
// node-sim then never recreates.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace nodesim {

// The modules node-sim creates; only "nvidia" is held by pods (the others stay at refcount 0).
inline constexpr const char* kHeldModule = "nvidia";

// A pod holding the GPU: "ns/name" (for the users file) and its UID (for its process's cgroup).
struct SimHolder {
  std::string key;
  std::string uid;
  bool operator==(const SimHolder&) const = default;
};

class SimKernel {
 public:
  explicit SimKernel(std::filesystem::path sim_root);

  // Creates sys/module/{nvidia,nvidia_uvm,nvidia_modeset}/{refcnt,users} with refcount 0 ("driver loaded"),
  // proc/devices and the device nodes (a warning if they cannot be created: holders are then not found).
  dm::Status load_driver();

  // Sets the nvidia module's refcount to holders.size(), its users file to the holders (sorted "ns/name")
  // and one process per holder (created before the count goes up, removed after it goes down). Does nothing
  // if they did not change; if the module's directory is gone it only removes the processes (logging once).
  // Returns an error if a file could not be written.
  dm::Status set_holders(std::vector<SimHolder> holders);

  // The nvidia module is loaded (its directory exists).
  [[nodiscard]] bool driver_loaded() const;

  // Writes DIR/run/nvidia/nvidia-driver.state (the driver configuration digest the loaded driver was
  // installed with), creating DIR/run/nvidia if needed.
  dm::Status write_driver_state(const std::string& digest);

  [[nodiscard]] std::filesystem::path module_dir(const std::string& module) const;

 private:
  dm::Status add_process(const SimHolder& holder);
  void remove_process(const SimHolder& holder);

  std::filesystem::path root_;
  bool known_ = false;  // holders_ reflects what is on disk
  std::vector<SimHolder> holders_;
  std::map<std::string, int> pid_of_uid_;  // the simulated process of each holding pod
  int next_pid_ = 40000;
  bool gone_logged_ = false;
};

// Writes `content` to `path` atomically (a temporary file in the same directory, then rename), so a reader
// never sees a partial file. Does not create the directory.
dm::Status write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace nodesim
