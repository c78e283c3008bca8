#include "manager/commands/phase_tally.h"

#include "kube/objects.h"

namespace dm::manager {

void PhaseTally::count(RunProgress& progress, const PodSnapshot& pods, size_t modules,
                       const EvictedPods& evicted) {
  const auto phase = progress.current();
  std::map<std::string, bool> now;  // UID -> an annotated GPU client
  for (const auto& p : pods) {
    now.emplace(kube::uid(*p), gpu_client_designation(*p) == ClientDesignation::kClient);
  }
  if (phase) {
    size_t gone = 0;
    size_t clients = 0;
    size_t workloads = 0;
    for (const auto& [uid, client] : phase_pods_) {
      if (now.contains(uid)) continue;
      // During pause-operands the clients are reset, and the GPU workloads evicted, side by side with the
      // operand wait: each is counted as what it is.
      const bool beside = *phase == Phase::kPauseOperands;
      if ((beside && client) || evicted.late_clients.contains(uid)) {
        ++clients;
      } else if (evicted.workloads.contains(uid)) {
        ++workloads;
      } else {
        ++gone;
      }
    }
    progress.add_pods_gone(*phase, gone);
    progress.add_gpu_clients_reset(clients);
    progress.add_pods_gone(Phase::kEvictWorkloads, workloads);
    if (phase_modules_ > modules) progress.add_modules_unloaded(phase_modules_ - modules);
  }
  phase_pods_ = std::move(now);
  phase_modules_ = modules;
}

}  // namespace dm::manager
