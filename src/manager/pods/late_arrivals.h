// GPU users that arrive late (docs/behaviour.md, Late arrivals): the waits of the first evictions track the
// pods they evicted, not what is bound to the node afterwards. A pod the scheduler placed before the cordon
// or the taint can still be bound after it (its caches lag behind, most of all after an API server
// restart), and then holds the GPU at the unload. Before the unload one fresh look (a LIST, not the pod
// watch's cache) finds them, and they are evicted and waited for like the first ones; after a refused
// unload the pods holding the driver are evicted when they are pods this run may evict.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "host/devices.h"
#include "manager/pods/drain.h"
#include "manager/pods/eviction.h"
#include "manager/pods/gpu_clients.h"

namespace dm::manager {

// How long pods may keep arriving before the run gives up (something keeps placing them): a lagging
// scheduler sees the cordon and the taint within seconds; whatever still places pods after this is
// something else.
inline constexpr Duration kLateArrivalPatience = std::chrono::seconds(30);
// After an API server outage the run met, pods may keep arriving until this long after the server answered
// again: the scheduler's and the controllers' caches relist at the back-off their watches reached during
// the outage (client-go's reflectors: doubling up to 30 s, jittered up to twice that), and decide from the
// node as it was until then.
inline constexpr Duration kLateArrivalPatienceAfterOutage = std::chrono::seconds(90);

// Whether the patience with pods arriving late still runs at `now` because of an API server outage that
// ended at `outage_ended` (nullopt: none met).
[[nodiscard]] inline bool late_arrivals_after_outage(TimePoint now, std::optional<TimePoint> outage_ended) {
  return outage_ended && now - *outage_ended < kLateArrivalPatienceAfterOutage;
}
// Whether pods still arriving at `now`, the first of them found at `first_found`, end the run.
[[nodiscard]] inline bool late_arrivals_exhausted(TimePoint now, TimePoint first_found,
                                                  std::optional<TimePoint> outage_ended) {
  return now - first_found >= kLateArrivalPatience && !late_arrivals_after_outage(now, outage_ended);
}
// The pause before the next look after a round's evictions: the first, then doubled, at most the last.
inline constexpr Duration kLateArrivalFirstPause = std::chrono::seconds(1);
inline constexpr Duration kLateArrivalLongestPause = std::chrono::seconds(8);
// How long a process outside any pod may still hold the driver after the host's first look before the
// unload, before the run fails naming it: a host tool that was closing its device files as the look came
// (nvidia-smi, a monitoring agent's probe) lets go within moments; one that still holds them after this is a
// service to stop. The looks pause as the late-arrival looks do (kLateArrivalFirstPause, doubling), the last
// one at the patience's end: at 0, 1, 3, 7 and 10 s.
inline constexpr Duration kHostHolderPatience = std::chrono::seconds(10);

// What one look found, by who takes it: the client reset (annotated clients, under the taint) or the
// GPU-workload eviction (only when this run evicts workloads).
struct LateLook {
  std::vector<EvictionTarget> clients;
  std::vector<EvictionTarget> workloads;
  std::vector<std::string> names;    // "ns/name (GPU workload)", "ns/name (GPU client)"
  std::vector<std::string> refused;  // "ns/name: why" for a late pod that may not be evicted
  [[nodiscard]] bool empty() const { return clients.empty() && workloads.empty() && refused.empty(); }
};

class LateArrivals {
 public:
  // `workloads`: GPU workloads are this run's to evict (the eviction switches); `beside`: pods other steps
  // own (the operand pods, which their labels keep off the node).
  LateArrivals(const DrainContext& ctx, GpuClientReset& clients, bool workloads, TakenBeside beside);

  // Told once, before the first late pod is evicted (the run's phase).
  void on_first_eviction(std::function<void()> f) { on_first_eviction_ = std::move(f); }

  // Looks (fresh LIST) until nothing arrived late; evicts what did, waits for it and pauses before the
  // next look (kLateArrivalFirstPause, doubling); a pod still arriving once kLateArrivalPatience has passed
  // since the first late one was found is an error naming it. A late pod that may not be evicted (no
  // controller without DRAIN_USE_FORCE, ...) is an error at once.
  Status evict_until_none();

  // After a refused unload: when every pod among `holder_uids` (the pods whose processes hold the driver)
  // is a pod this run may evict, evicts them and returns true; false (nothing done) otherwise.
  Result<bool> evict_holders(const std::set<std::string>& holder_uids);

  // After the refused unload `unloaded`: while the processes holding the driver (`holders()`) all run in
  // pods this run may evict, evicts those pods and tries `unload()` again, as often as pods keep arriving
  // to hold it, pausing before every look but the first (kLateArrivalFirstPause, doubling) and for at
  // most the late-arrival patience from the first refusal (kLateArrivalPatience, or until
  // kLateArrivalPatienceAfterOutage after an outage). `unloaded` becomes the last attempt's outcome; a
  // refusal that outlasts the patience says so. The error returned is an eviction's or SIGTERM's.
  Status evict_holders_until_unloaded(const std::function<std::vector<host::HolderProcess>()>& holders,
                                      const std::function<Status()>& unload, Status& unloaded);

  // The host's evidence, right before the unload (docs/behaviour.md, Late arrivals): `holders()` looks at
  // the processes holding the NVIDIA driver. While one runs outside any pod it looks again, logging each
  // look, for at most kHostHolderPatience; one still there then fails the run, naming it (nothing is
  // evicted or unloaded). Of the last look's holders, a designated GPU client among the pods holding it
  // (put back early by its DaemonSet controller) is reset as a client. With `workloads` on, any other pod of
  // the node that holds it and that no step took off is decided as a GPU workload (same controller and force
  // rules), evicted and waited for, each said "found holding the GPU on the host"; one that may not be
  // evicted, or a UID that is no pod of the node, fails naming it. Pods among `skip_uids` (this program's
  // own) are passed over. Returns the pods it evicted.
  Result<size_t> evict_host_holders(const std::function<std::vector<host::HolderProcess>()>& holders,
                                    const std::set<std::string>& skip_uids);

  // The UIDs evicted or waited for so far (for the run's counts).
  [[nodiscard]] const std::vector<std::string>& workload_uids() const { return workload_uids_; }
  [[nodiscard]] const std::vector<std::string>& client_uids() const { return client_uids_; }

  // Sorts `pods` into a LateLook (no request but the DaemonSet and claim lookups of the drain filters).
  [[nodiscard]] Result<LateLook> look(const PodSnapshot& pods) const;

 private:
  Status evict(const LateLook& found);

  DrainContext ctx_;
  GpuClientReset& clients_;
  bool workloads_;
  TakenBeside beside_;
  std::function<void()> on_first_eviction_;
  std::vector<std::string> workload_uids_;
  std::vector<std::string> client_uids_;
};

}  // namespace dm::manager
