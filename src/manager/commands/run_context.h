// What the steps of one run hand on to the steps after them (docs/ARCHITECTURE.md, The run context). A run
// has one RunContext; the run gives it to each step (StepCall, step_def.h), which fills what it found out and
// reads what an earlier step left. The order of the steps in each path (manager/commands/flow_steps.cc) is
// what makes a field filled before it is read; a field a step may find unfilled (its filler is not on every
// path that reads it) says what it holds then.
#pragma once

#include <optional>

#include "common/result.h"
#include "manager/commands/own_pod.h"
#include "manager/commands/phase_tally.h"
#include "manager/pods/late_arrivals.h"
#include "manager/rules/skip.h"

namespace dm::manager {

// What the GPU-workload eviction (take-gpu-users-off) leaves to the steps after it.
enum class WorkloadEviction {
  kDone,          // evicted, nothing to evict, or not this path's to evict
  kDrainPending,  // it failed with auto drain on: the full drain follows once the steps beside it are done
};

// The run's first node write, which takes the lease with what is due then (Uninstall::first_write).
struct FirstWrite {
  // The lease waits for the first write: set before the steps (Uninstall::wait_for_lease), cleared by the
  // step that makes it (pause-operands, or the first other step that writes: take_lease_if_pending).
  bool lease_pending = false;
  bool cordoned = false;  // it cordoned the node: the cordon of take-gpu-users-off is made already
  bool unsure = false;    // it failed without saying whether it was applied (read by the cleanup)
};

// What the preflight found out about the pod this program runs in (Uninstall::preflight), before the lease.
struct OwnPodCheck {
  std::optional<OwnPod> pod;  // nullopt: not running in a pod, or the pod was not found
  // The pod does not tolerate the GPU client taint, and the look before the first write found no client to
  // taint for: the client reset refuses with this where it would add the taint, and the first write carries
  // no taint. nullopt: no such refusal.
  std::optional<Error> taint_refusal;
};

struct RunContext {
  // Filled by the preflight, before the lease and every step; left empty on the pre-installed path (no
  // preflight), whose steps read neither. Read by the lease (its holder's name), the client reset (the
  // refusal) and unload-driver (its own pod is no holder to evict).
  OwnPodCheck own_pod;
  // Read when the path is decided, and only when the driver is loaded (Uninstall::path_inputs): the default
  // (no skip, nothing to log) otherwise. Logged by report-skip-decision.
  SkipDecision skip;
  FirstWrite first_write;
  // Filled by take-gpu-users-off; drain-after-failed-eviction runs only when it is kDrainPending.
  WorkloadEviction workload_eviction = WorkloadEviction::kDone;
  // Filled by each step that evicts (take-gpu-users-off, evict-late-arrivals, unload-driver); read at each
  // phase boundary and at the end, for the summary (PhaseTally).
  EvictedPods evicted;
  // The looks for GPU users bound after the cordon or the taint: made by the run before its first step
  // (Uninstall::execute), kept from evict-late-arrivals to unload-driver, so that the unload goes on from
  // what the look before it found. Steps that read it run only after the run made it.
  std::optional<LateArrivals> late;
};

}  // namespace dm::manager
