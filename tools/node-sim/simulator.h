// node-sim's kubelet: registers the Node, keeps it Ready (status + Lease heartbeats), starts the pods bound
// to it, finishes their termination after the grace period, and keeps the simulated kernel's nvidia
// refcount equal to the number of running pods that hold the GPU.
//
// In kernel-only mode (a real kubelet runs the node) it does none of the kubelet's work: see SimOptions.
//
// One thread decides: a list+watch of the node's pods drives everything, and the watch's frequent `done`
// check is the timer that wakes when the next termination, retry or heartbeat is due. The DELETEs that end
// terminated pods go to a few worker threads (finisher.h), so pods due together end together. Writes go
// through a second client so that they never run inside the watch's own connection.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "finisher.h"
#include "kernel.h"
#include "kube/api.h"

namespace nodesim {

struct SimOptions {
  std::string node;
  std::string sim_root;
  int gpus = 8;
  bool driver = true;  // false: --no-driver, no module files
  // --kernel-only: a real kubelet runs the node; node-sim only publishes the nvidia.com/gpu capacity, keeps
  // the simulated kernel's refcount from the pods' reported container states, and loads the driver for a
  // running pod annotated node-sim/loads-driver.
  bool kernel_only = false;
  std::chrono::milliseconds heartbeat{10000};
  // How often the watch thread checks whether something is due: the resolution of grace-period timers.
  // A check that finds nothing due costs a clock read.
  std::chrono::milliseconds tick{10};
  // Everything is re-checked at least this often, whatever is due (kernel-only mode: its only timer).
  std::chrono::milliseconds recheck{200};
  unsigned finish_workers = 6;  // DELETEs in flight at once (the client pools 8 connections)
};

class Simulator {
 public:
  // `watch_client` only watches; `client` makes every other request.
  Simulator(SimOptions options, std::unique_ptr<dm::kube::Api> watch_client,
            std::unique_ptr<dm::kube::Api> client, const dm::Clock& clock, dm::CancelToken cancel);

  // Registers the node, loads the simulated driver and runs until `cancel` fires (ok) or a fatal error.
  dm::Status run();

 private:
  struct TrackedPod {
    nlohmann::json pod;
    std::optional<dm::TimePoint> terminating_since;  // when node-sim first saw deletionTimestamp
    dm::TimePoint next_attempt{};                    // backoff after a failed request
    bool started = false;                            // node-sim made it Running (its "process" runs)
    bool deleting = false;                           // its DELETE is with the finisher
    bool finished = false;                           // node-sim deleted it
    bool exited = false;                             // its "process" exited: it no longer holds the GPU
    bool stuck_logged = false;
    bool loaded_driver = false;     // kernel-only: the driver was loaded for this pod
    std::optional<bool> gpu_claim;  // it references an allocated GPU DRA claim (once its claims were read)
  };

  dm::Status register_node();
  // Kernel-only mode: waits for the kubelet's Node, then sets its nvidia.com/gpu capacity if it differs.
  dm::Status publish_capacity();
  void load_driver_for(TrackedPod& t);
  // The pod holds the GPU (pod_rules.h holds_gpu), its DRA claims read once from the API server.
  bool holds_gpu_now(TrackedPod& t);
  // Whether the pod references an allocated claim of the GPU DRA driver (driver-manager's claim rule,
  // manager/rules/claims). A claim that is not found is none; another error is asked again next time.
  bool gpu_claim(TrackedPod& t);
  dm::Status heartbeat();
  dm::Status renew_lease(const std::string& now);
  void on_sync(const std::vector<nlohmann::json>& items);
  void on_event(const dm::kube::WatchEvent& event);
  // `seen` is when node-sim learnt of this version of the pod (one instant for a whole list).
  void upsert(const nlohmann::json& pod, dm::TimePoint seen);
  // The watch's periodic check: reconciles after a change, when something is due, or every `recheck`.
  void on_tick();
  // Runs every due action (start pods, end terminations, heartbeat, refcount) and sets next_wake_.
  void reconcile();
  void start_pod(TrackedPod& t);
  // Takes the finisher's outcomes: finished pods, or a retry after a failed DELETE.
  void collect_finished();
  void update_kernel();

  SimOptions opt_;
  std::unique_ptr<dm::kube::Api> watch_client_;
  std::unique_ptr<dm::kube::Api> client_;
  const dm::Clock& clock_;
  dm::CancelToken cancel_;
  SimKernel kernel_;
  std::map<std::string, TrackedPod> pods_;  // by UID
  std::string node_uid_;
  std::string registered_at_;  // RFC 3339; lastTransitionTime of the conditions
  dm::TimePoint next_heartbeat_{};
  dm::TimePoint next_kernel_attempt_{};
  dm::TimePoint next_wake_{};  // the earliest moment something is due
  bool changed_ = false;       // a watch event or list arrived since the last reconcile
  unsigned ip_counter_ = 0;
  // Declared after client_, which it uses: destroyed (workers joined) first. Not in kernel-only mode.
  std::unique_ptr<Finisher> finisher_;
};

// Wall-clock time in RFC 3339 (seconds) and MicroTime (microseconds) formats, UTC.
std::string rfc3339_now();
std::string micro_time_now();

}  // namespace nodesim
