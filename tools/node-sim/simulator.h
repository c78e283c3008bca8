// node-sim's kubelet: registers the Node, keeps it Ready (status + Lease heartbeats), starts the pods bound
// to it, finishes their termination after the grace period, and keeps the simulated kernel's nvidia
// refcount equal to the number of running pods that hold the GPU.
//
// In kernel-only mode (a real kubelet runs the node) it does none of the kubelet's work: see SimOptions.
//
// One thread: a list+watch of the node's pods drives everything; the watch's periodic `done` check is the
// timer that runs heartbeats and due terminations. Writes go through a second client so that they never
// run inside the watch's own connection.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "kernel.h"
#include "kube/client.h"

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
  std::chrono::milliseconds tick{200};  // resolution of grace-period timers
};

class Simulator {
 public:
  // `watch_client` only watches; `client` makes every other request.
  Simulator(SimOptions options, std::unique_ptr<dm::kube::Client> watch_client,
            std::unique_ptr<dm::kube::Client> client, const dm::Clock& clock, dm::CancelToken cancel);

  // Registers the node, loads the simulated driver and runs until `cancel` fires (ok) or a fatal error.
  dm::Status run();

 private:
  struct TrackedPod {
    nlohmann::json pod;
    std::optional<dm::TimePoint> terminating_since;  // when node-sim first saw deletionTimestamp
    dm::TimePoint next_attempt{};                    // backoff after a failed request
    bool started = false;                            // node-sim made it Running (its "process" runs)
    bool finished = false;                           // node-sim deleted it
    bool exited = false;                             // its "process" exited: it no longer holds the GPU
    bool stuck_logged = false;
    bool loaded_driver = false;  // kernel-only: the driver was loaded for this pod
  };

  dm::Status register_node();
  // Kernel-only mode: waits for the kubelet's Node, then sets its nvidia.com/gpu capacity if it differs.
  dm::Status publish_capacity();
  void load_driver_for(TrackedPod& t);
  dm::Status heartbeat();
  dm::Status renew_lease(const std::string& now);
  void on_sync(const std::vector<nlohmann::json>& items);
  void on_event(const dm::kube::WatchEvent& event);
  void upsert(const nlohmann::json& pod);
  // Runs every due action (start pods, finish terminations, heartbeat, refcount). Called after each watch
  // event and every tick.
  void reconcile();
  void start_pod(TrackedPod& t);
  void finish_pod(TrackedPod& t);
  void update_kernel();

  SimOptions opt_;
  std::unique_ptr<dm::kube::Client> watch_client_;
  std::unique_ptr<dm::kube::Client> client_;
  const dm::Clock& clock_;
  dm::CancelToken cancel_;
  SimKernel kernel_;
  std::map<std::string, TrackedPod> pods_;  // by UID
  std::string node_uid_;
  std::string registered_at_;  // RFC 3339; lastTransitionTime of the conditions
  dm::TimePoint next_heartbeat_{};
  dm::TimePoint next_kernel_attempt_{};
  unsigned ip_counter_ = 0;
};

// Wall-clock time in RFC 3339 (seconds) and MicroTime (microseconds) formats, UTC.
std::string rfc3339_now();
std::string micro_time_now();

}  // namespace nodesim
