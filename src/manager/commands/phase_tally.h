// What left the node during each phase of a run, for its summary line (manager/commands/progress): at each
// phase boundary the pods and modules then on the node are compared with those at the one before. A pod that
// left is a GPU client reset, a GPU workload evicted or a pod gone from the phase that ends.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "manager/commands/progress.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

// The pods a run evicted, by UID, whichever step evicted them: each is counted as what it is, whatever phase
// it leaves in.
struct EvictedPods {
  std::set<std::string> workloads;     // GPU workloads (beside the operand wait, late, holding the driver)
  std::set<std::string> late_clients;  // annotated GPU clients evicted late
};

class PhaseTally {
 public:
  // A phase boundary: what left since the last one is added to `progress` under its current phase (nothing
  // before the first phase), `evicted` as what it is; `pods` and `modules` (loaded NVIDIA and nouveau
  // modules) are where the next phase starts.
  void count(RunProgress& progress, const PodSnapshot& pods, size_t modules, const EvictedPods& evicted);

 private:
  std::map<std::string, bool> phase_pods_;  // UIDs on the node when the current phase began -> GPU client
  size_t phase_modules_ = 0;                // modules loaded then
};

}  // namespace dm::manager
