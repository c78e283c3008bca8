// The GPU users taken off the node side by side: the operands, the annotated GPU clients and the GPU
// workloads (docs/gpu-clients.md, Clients go while the operands go; docs/behaviour.md, GPU workload
// eviction).
#include <spdlog/spdlog.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "manager/commands/cordon_steps.h"
#include "manager/commands/run_steps.h"
#include "manager/commands/step_def.h"
#include "manager/pods/drain.h"
#include "manager/pods/waits.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

namespace {

// See docs/behaviour.md, GPU workload eviction. Runs beside the operand wait and the client reset: the pods
// those take off the node are not this step's, and `stop` fires when one of them fails (its error is then
// the run's, so a stopped eviction logs no failure of its own).
Status evict_workloads(const StepEnv& env, RunServices& services, const CancelToken& stop,
                       const std::vector<OperandWait>& beside, RunContext& run) {
  const DrainContext& run_ctx = env.run;
  const Settings& settings = run_ctx.settings;
  if (auto c = cordon_node(run_ctx.node, services.undo, settings, run.first_write); !c) return c;
  if (stop.cancelled())
    return Error("cancelled before the GPU pods of node " + settings.node_name + " were evicted");
  const DrainContext ctx{settings, run_ctx.client, run_ctx.clock, stop, run_ctx.node, run_ctx.pods};
  const TakenBeside operands = operand_pods(beside, settings.operator_namespace);
  const TakenBeside taken = [&](const nlohmann::json& pod) -> std::optional<std::string> {
    if (auto why = operands(pod)) return why;
    if (gpu_client_designation(pod) == ClientDesignation::kClient && !is_dra_plugin_client(pod))
      return "an annotated GPU client, reset beside";
    return std::nullopt;
  };
  std::vector<std::string> uids;
  auto s = evict_gpu_workloads(ctx, taken, &uids);
  run.evicted.workloads.insert(uids.begin(), uids.end());
  if (s) return s;
  if (stop.cancelled() && !run_ctx.cancel.cancelled()) return s;
  spdlog::info("Failed to drain node of GPU pods");
  // The error is logged by whoever handles it: the run's end when it fails the run, here when the full
  // drain takes over.
  if (run_ctx.cancel.cancelled()) return s;
  if (!services.flow.facts.auto_drain)
    return s.error().wrap("cannot proceed until all GPU pods are drained from the node");
  spdlog::error("{}", s.error().message);
  run.workload_eviction = WorkloadEviction::kDrainPending;  // once the steps beside are done
  return ok_status();
}

}  // namespace

// The operand waits, the reset of the pods annotated nvidia.com/gpu.client (not DRA plugins) and, when
// `with_workloads`, the cordon and the GPU-workload eviction run side by side: none needs another one's pods
// gone (docs/gpu-clients.md, Clients go while the operands go). All of them end before the skip decision is
// logged; the clients go also on the skip path and with the upgrade policy on (they are clients, not
// workloads). The first to fail stops the others and is the run's error; the taint and the cordon register
// their own undo (the undo list takes registrations from any thread). The client reset runs on this thread,
// the operand wait (it only reads the pod watch) and the workload eviction on their own. A failed eviction
// that falls back to the full drain is no failure here: the drain runs once the others are done, so it
// never evicts a client or an operand that they are still taking off the node.
Status take_gpu_users_off(const StepEnv& env, RunServices& services, RunContext& run) {
  const DrainContext& ctx = env.run;
  const auto waits = pause_waits(services.labels.snapshot(), services.labels.operands());
  const auto& ns = ctx.settings.operator_namespace;
  log_operand_waits_start(ctx.pods, waits, ns);
  const CancelToken stop_wait = ctx.cancel.child();
  const CancelToken stop_clients = ctx.cancel.child();
  const CancelToken stop_workloads = ctx.cancel.child();
  enum Side : int { kNone, kOperands, kClients, kWorkloads };
  std::atomic<int> failed_first{kNone};
  auto failed = [&](Side side) {
    int none = kNone;
    failed_first.compare_exchange_strong(none, side);
    if (side != kOperands) stop_wait.cancel();
    if (side != kClients) stop_clients.cancel();
    if (side != kWorkloads) stop_workloads.cancel();
  };
  Status waited = ok_status();
  std::thread waiter([&] {
    waited = await_operands(ctx.pods, waits, ns, operand_wait_deadline(ctx), stop_wait);
    if (!waited) failed(kOperands);
  });
  Status evicted = ok_status();
  std::thread evictor;
  if (services.flow.evict_workloads) {
    evictor = std::thread([&] {
      evicted = evict_workloads(env, services, stop_workloads, waits, run);
      if (!evicted) failed(kWorkloads);
    });
  }
  Status reset = env.clients.reset_clients(stop_clients);
  if (!reset) failed(kClients);
  waiter.join();
  if (evictor.joinable()) evictor.join();
  switch (failed_first.load()) {
    case kClients:
      return reset;
    case kWorkloads:
      return evicted;
    case kOperands: {
      const Error e = operand_wait_failed(ctx.pods, waits, ns, waited.error());
      spdlog::error("Failed to evict GPU operator components, attempting cleanup");
      return e;
    }
    default:
      return ok_status();
  }
}

// The row of the step above (step_def.h).

// The operands, the annotated GPU clients and the GPU workloads go side by side.
const StepDef& take_gpu_users_off_step() {
  static constexpr StepDef kDef{
      .step = Step::kTakeGpuUsersOff,
      .name = "take-gpu-users-off",
      .run = [](StepCall& c) { return take_gpu_users_off(c.env, c.services, c.run); },
      .render = [](StepPlan& plan) { plan.take_gpu_users_off(); }};
  return kDef;
}

}  // namespace dm::manager
