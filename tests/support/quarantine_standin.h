// A stand-in for NVSentinel's fault quarantine as docs/gpu-clients.md configures it, for both test tiers
// (kube::Api: the in-memory cluster's controller client, or a kube::Client of the real control plane).
//
// The rule it applies is the recipe's: when no DCGM pod serves on the node (the gpu-health-monitor would
// report GpuDcgmConnectivityFailure), the node is quarantined - cordoned if it is not, and given NVSentinel's
// marks (the quarantineHealthEvent annotation, the dgxc.nvidia.com/nvsentinel-state=quarantined label) -
// unless the recipe's Node expression excludes it (recipe_excludes(), the CEL expression's equivalent).
// It decides once, at the first moment DCGM is down.
//
// So that it decides while DCGM is down and before the run goes on, the tests' DCGM pod is stuck
// terminating (the run's operand wait waits for it): the stand-in finishes that termination (deletes the
// pod with grace period 0) once it has decided, as the kubelet would have.
#pragma once

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "kube/api.h"

namespace dm::test {

// NVSentinel's keys, spelled as its source spells them (fault-quarantine/pkg/common/common.go,
// statemanager/statemanager.go), apart from driver-manager's own table of marks on purpose.
inline constexpr const char* kNvsQuarantineAnnotation = "quarantineHealthEvent";
inline constexpr const char* kNvsStateLabel = "dgxc.nvidia.com/nvsentinel-state";
inline constexpr const char* kNvsOptOutLabel = "k8saas.nvidia.com/ManagedByNVSentinel";
inline constexpr const char* kUpgradeStateLabel = "nvidia.com/gpu-driver-upgrade-state";

// The recipe's Node rule: excluded while the node is opted out of NVSentinel (ManagedByNVSentinel=false)
// or while the GPU Operator's upgrade controller has it in an upgrade (from cordon-required until
// uncordon-required).
bool recipe_excludes(const nlohmann::json& node);

class QuarantineStandIn {
 public:
  struct Options {
    std::string node;
    std::string ns;                        // where the DCGM DaemonSet runs
    std::string dcgm_app = "nvidia-dcgm";  // its pods' app label
  };
  // Starts watching at once (a thread of its own, polling every few milliseconds); `api` must outlive it.
  QuarantineStandIn(kube::Api& api, Options options);
  ~QuarantineStandIn();
  QuarantineStandIn(const QuarantineStandIn&) = delete;
  QuarantineStandIn& operator=(const QuarantineStandIn&) = delete;

  // Whether it saw DCGM down, and what it decided then.
  [[nodiscard]] bool saw_dcgm_down() const { return down_; }
  [[nodiscard]] bool quarantined() const { return quarantined_; }
  [[nodiscard]] bool excluded() const { return excluded_; }
  // Why a step failed (a request the API server refused), empty while none did.
  [[nodiscard]] std::string error() const;

 private:
  void loop();
  bool decide();  // true once decided

  kube::Api& api_;
  Options o_;
  bool seen_up_ = false;  // a DCGM pod served once: "down" means it went away
  std::atomic<bool> down_{false};
  std::atomic<bool> quarantined_{false};
  std::atomic<bool> excluded_{false};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::string error_;
  std::thread thread_;
};

}  // namespace dm::test
