// The late arrivals and the unload (docs/behaviour.md, Late arrivals; Kernel modules and the driver root;
// Full-drain fallback).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <set>
#include <string>
#include <vector>

#include "common/duration_text.h"
#include "manager/commands/cordon_steps.h"
#include "manager/commands/env_steps.h"
#include "manager/commands/run_steps.h"
#include "manager/commands/step_def.h"
#include "manager/pods/drain.h"

namespace dm::manager {

namespace {

Status unless_terminated(const StepEnv& env) {
  if (env.run.cancel.cancelled()) return Error("terminated by SIGTERM");
  return ok_status();
}

// What the late-arrival looks evicted, into the run's counts.
void count_evicted(const LateArrivals& late, RunContext& run) {
  run.evicted.workloads.insert(late.workload_uids().begin(), late.workload_uids().end());
  run.evicted.late_clients.insert(late.client_uids().begin(), late.client_uids().end());
}

// A refused unload whose holders are all pods this run may evict (bound after the last look): they are
// evicted and the unload tried again, as long as pods keep arriving within the late-arrival patience;
// `unloaded` becomes the last attempt's outcome. Otherwise the refusal stands.
Status evict_late_holders_and_unload(const StepEnv& env, RunContext& run, Status& unloaded) {
  LateArrivals& late = run.late.value();
  auto s = late.evict_holders_until_unloaded([&env] { return env.host.nvidia_holder_processes(); },
                                             [&env] { return unload_nvidia_modules(env); }, unloaded);
  count_evicted(late, run);
  return s;
}

// The host's evidence before the unload: pods holding the driver that no step took off are evicted as GPU
// workloads; a holder outside any pod that keeps holding it through the host-holder patience fails the run
// here.
Status evict_host_holders(const StepEnv& env, RunServices& services, RunContext& run) {
  LateArrivals& late = run.late.value();
  late.on_first_eviction(nullptr);  // in the unload's phase
  std::set<std::string> own;
  if (run.own_pod.pod) own.insert(run.own_pod.pod->uid);
  auto n = late.evict_host_holders([&env] { return env.host.nvidia_holder_processes(); }, own);
  count_evicted(late, run);
  if (!n) return n.error();
  services.progress.add_host_holders_evicted(*n);
  return unless_terminated(env);
}

}  // namespace

Status evict_late_arrivals(RunServices& services, RunContext& run) {
  LateArrivals& late = run.late.value();
  late.on_first_eviction([&services] {
    if (services.progress.current() != Phase::kEvictWorkloads) services.enter(Phase::kEvictWorkloads);
  });
  auto s = late.evict_until_none();
  count_evicted(late, run);
  return s;
}

Status unload_driver(const StepEnv& env, RunServices& services, RunContext& run) {
  if (!env.host.module_loaded("nvidia")) return remove_stale_driver_root(env);
  if (auto h = evict_host_holders(env, services, run); !h) return h;
  auto s = unload_nvidia_modules(env);
  const CancelToken& cancel = env.run.cancel;
  if (!s && !cancel.cancelled()) {
    if (auto e = evict_late_holders_and_unload(env, run, s); !e) return e;
  }
  if (!s && services.flow.facts.auto_drain && !cancel.cancelled()) {
    spdlog::warn("{}", s.error().message);  // handled here: the drain and a second unload follow
    spdlog::info("Unable to cleanup driver modules, attempting again with node drain...");
    if (auto c = cordon_node(env.run.node, services.undo, env.run.settings, run.first_write); !c) return c;
    if (auto d = drain_node(env.run); !d) return d;
    if (auto k = unless_terminated(env); !k) return k;
    s = unload_nvidia_modules(env);
  }
  if (!s) {
    spdlog::error("Failed to uninstall nvidia driver components");
    return s;
  }
  spdlog::info("Successfully uninstalled nvidia driver components");
  return ok_status();
}

// The rows of the steps above (step_def.h).

namespace {

std::string late_arrivals_line(bool workloads) {
  return fmt::format(
      "look once more (a fresh list) for {} bound after the {}; evict them and look again after a pause, "
      "for at most {} ({} right after an API server outage)",
      workloads ? "GPU workloads and annotated GPU clients" : "annotated GPU clients",
      workloads ? "cordon and the taint" : "taint",
      format_duration(kLateArrivalPatience, DurationStyle::kWholeSeconds),
      format_duration(kLateArrivalPatienceAfterOutage, DurationStyle::kWholeSeconds));
}

// The unload with what precedes it on the host, and the full-drain fallback when auto drain is on.
void render_unload_driver(StepPlan& plan) {
  const FlowSteps& flow = plan.flow();
  plan.line("unload the NVIDIA kernel modules (all or nothing), unmount " + std::string(host::kDriverRoot) +
            ", remove the driver's pid file; before it, the holders on the host: a process outside any pod "
            "fails the run" +
            (flow.evict_workloads ? ", a pod no rule took off is evicted as a GPU workload" : "") +
            "; if pods that arrived late hold them: evict those and try again, as long as they keep arriving "
            "within the same patience");
  if (flow.facts.auto_drain)
    plan.line("if the unload fails: cordon, drain the node (full-drain fallback), retry the unload");
}

}  // namespace

// It opens the phase of what is left before the unload itself, when something arrived.
const StepDef& evict_late_arrivals_step() {
  static constexpr StepDef kDef{
      .step = Step::kEvictLateArrivals,
      .name = "evict-late-arrivals",
      .run = [](StepCall& c) { return evict_late_arrivals(c.services, c.run); },
      .opens_phase = [](const StepEnv&) { return false; },
      .render = [](StepPlan& plan) { plan.line(late_arrivals_line(plan.flow().evict_workloads)); }};
  return kDef;
}

const StepDef& unload_driver_step() {
  static constexpr StepDef kDef{.step = Step::kUnloadDriver,
                                .name = "unload-driver",
                                .run = [](StepCall& c) { return unload_driver(c.env, c.services, c.run); },
                                .render = render_unload_driver};
  return kDef;
}

}  // namespace dm::manager
