// The simulated kernel of one node: DIR/sys/module/<m>/refcnt (decimal + newline) and
// DIR/sys/module/<m>/users ("ns/name" per line) for the NVIDIA modules. The simulated host of driver-manager
// reads these files; unloading a module there removes its directory, which node-sim then never recreates.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace nodesim {

// The modules node-sim creates; only "nvidia" is held by pods (the others stay at refcount 0).
inline constexpr const char* kHeldModule = "nvidia";

class SimKernel {
 public:
  explicit SimKernel(std::filesystem::path sim_root);

  // Creates sys/module/{nvidia,nvidia_uvm,nvidia_modeset}/{refcnt,users} with refcount 0 ("driver loaded").
  dm::Status load_driver();

  // Sets the nvidia module's refcount to holders.size() and its users file to the holders (sorted
  // "ns/name"). Does nothing if they did not change, and nothing (logging once) if the module's directory
  // is gone. Returns an error if a file could not be written.
  dm::Status set_holders(std::vector<std::string> holders);

  // The nvidia module is loaded (its directory exists).
  [[nodiscard]] bool driver_loaded() const;

  // Writes DIR/run/nvidia/nvidia-driver.state (the driver configuration digest the loaded driver was
  // installed with), creating DIR/run/nvidia if needed.
  dm::Status write_driver_state(const std::string& digest);

  [[nodiscard]] std::filesystem::path module_dir(const std::string& module) const;

 private:
  std::filesystem::path root_;
  bool known_ = false;  // holders_ reflects what is on disk
  std::vector<std::string> holders_;
  bool gone_logged_ = false;
};

// Writes `content` to `path` atomically (a temporary file in the same directory, then rename), so a reader
// never sees a partial file. Does not create the directory.
dm::Status write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace nodesim
