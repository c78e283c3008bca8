// What a step of the run runs with (docs/ARCHITECTURE.md, The uninstall flow and its undo list): the
// collaborators every path has from the run's start, made with the run (Uninstall) and handed to the step by
// the run's table. A step body that is a function over it runs alone as well, against the in-memory cluster
// and a host of the test's own (tests/unit/env_steps_test.cc).
#pragma once

#include "host/host.h"
#include "manager/pods/drain.h"
#include "manager/pods/gpu_clients.h"

namespace dm::manager {

struct StepEnv {
  // The settings, the run's requests, the clock, the run's token (SIGTERM), the run's node writer and the
  // pod watch: what the eviction and the drain take as well.
  const DrainContext& run;
  host::Host& host;
  // The annotated third-party GPU clients and their taint, made with the run; the run gives it the label
  // pause, the node as last seen and the own pod's refusal once the lease is taken, before any step that
  // resets clients.
  GpuClientReset& clients;
};

}  // namespace dm::manager
