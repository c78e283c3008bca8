// The uninstall_driver flow (docs/behaviour.md walks through it): one node GET for the snapshot, cordon
// ownership, one deadline for all operand waits, an undo list that every change to the node registers with
// and that every exit path runs, and SIGTERM handled like a failure (exit 143). The path and its steps are
// decided by manager/commands/flow_steps; `execute` runs them, each through its row (step_def.h), whose body
// is a function over the run's environment (env_steps.h), over its services too (run_steps.h), or the
// run's restore (undo-changes). Used by uninstall.cc only.
#pragma once

#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "host/host.h"
#include "kube/api.h"
#include "kube/config.h"
#include "kube/stopped_by.h"
#include "manager/commands/flow_steps.h"
#include "manager/commands/operand_labels.h"
#include "manager/commands/own_pod.h"
#include "manager/commands/phase_tally.h"
#include "manager/commands/progress_reporter.h"
#include "manager/commands/run_context.h"
#include "manager/commands/run_services.h"
#include "manager/commands/step_env.h"
#include "manager/node/known_node.h"
#include "manager/node/lease.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/node/undo.h"
#include "manager/pods/drain.h"
#include "manager/pods/gpu_clients.h"
#include "manager/pods/late_arrivals.h"
#include "manager/pods/pod_watch.h"
#include "manager/pods/waits.h"
#include "manager/rules/operands.h"
#include "manager/rules/paused_record.h"
#include "manager/rules/settings.h"
#include "manager/rules/skip.h"

namespace dm::manager {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitTerminated = 143;

// One run of uninstall_driver on this node.
class Uninstall {
 public:
  // `cancel` is the run's token (SIGTERM): it stops every request of the run's steps (run_requests_), not
  // those of the cleanup after a failure and of the run's last words, which have tokens of their own.
  Uninstall(const Settings& settings, kube::Api& connection, host::Host& host, const Clock& clock,
            CancelToken cancel)
      : settings_(settings),
        connection_(connection),
        host_(host),
        clock_(clock),
        cancel_(std::move(cancel)),
        run_requests_(connection, cancel_),
        node_(connection, clock, cancel_, settings.node_name),
        taint_(connection, clock, cancel_, settings.node_name),
        pods_(run_requests_, clock, settings.node_name),
        ctx_{settings, run_requests_, clock, cancel_, node_, pods_},
        gpu_clients_(run_requests_, pods_, clock, cancel_, settings, undo_, taint_),
        env_{ctx_, host, gpu_clients_},
        reporter_(run_requests_, clock, settings.node_name, known_node_) {
    node_.use_known_node(&known_node_);
    taint_.use_known_node(&known_node_);
  }

  // The run up to its exit code (143 once SIGTERM reached it, whatever ended it first).
  int run(const kube::Config& config);
  // The last words of a run, whatever its exit code: what the run started beside its main line is ended
  // first (end_side_work()), then the summary line (and on success a Normal Event: the run's only one).
  // Nothing of the run is left running once it returns.
  void finish(int exit_code);

 private:
  int run_to_end(const kube::Config& config);  // run() before SIGTERM's exit code
  void end_side_work();  // the pod watch, the progress writer and the lease renewal: cancelled and joined
  // The success path's undo list and the lease release, in one node write when every change can be
  // undone in it (each one alone otherwise, or when that write fails): the row of undo-changes calls it
  // through RunServices.
  Status undo_changes();
  // Before the steps of a path that changes the node: the preflight, the lease, the leftovers, and what the
  // path is decided from (into `in`). An exit code: the run ended there.
  std::optional<int> prepare(std::future<Status>& access, const nlohmann::json& first_look, FlowInputs& in);
  FlowInputs path_inputs();
  void decide(const FlowInputs& in);  // the path and its steps, into flow_
  // The decided steps in order, every path alike, with the path's first and last lines.
  Status execute();
  // The exit code of the steps' outcome, by the path's row (PathEnds): restore, release, or log only.
  int conclude(const Status& s);

  void start_from_leased_node(const nlohmann::json& node);
  bool read_daemonset_templates();  // into snapshot_, when the label pause has a key

  // What the steps' bodies share.
  Status adopt_leftovers(const nlohmann::json& node, LeftoverTaint taint);

  // Once no other run holds the lease: the node as read then (uninstall_writes.cc).
  Result<nlohmann::json> wait_for_lease(const nlohmann::json& node);
  int lease_not_taken(const Error& error);  // the exit code when wait_for_lease() failed
  // The run's first write when the lease is still to be taken.
  Status first_write(const nlohmann::json& labels, FirstWrite& first);
  Status take_lease_if_pending(FirstWrite& first);
  // The first write carries the GPU client taint too (uninstall_writes.cc).
  [[nodiscard]] bool taints_with_first_write() const;
  // Before the cleanup: with no first write yet, or one that may or may not have been applied and a node
  // (read through `node`, the cleanup's writer) that does not carry this run's lease, nothing of the run is
  // on the node: the undo list is emptied.
  void forget_changes_not_made(NodeOps& node);
  Status pause_labels(const nlohmann::json& labels, FirstWrite& first);
  // The run's node writers, for the undo list on the success path.
  NodeWriters run_writers() { return {node_, taint_}; }
  Status check_cancelled() const;
  void log_snapshot() const;
  Result<std::optional<OwnPod>> locate_own_pod(const std::optional<OwnPodRef>& ref);
  // Into run_.own_pod: the own pod, and the taint refusal when it does not tolerate the taint.
  Status preflight(std::future<Status>& access, const nlohmann::json& node);
  // Why this run adds no GPU client taint to `node`, as known before the first write; nullopt: it adds it.
  [[nodiscard]] std::optional<std::string> why_no_taint(const nlohmann::json& node,
                                                        const kube::Taint& taint) const;
  [[nodiscard]] std::string own_pod_name() const;
  void release_lease(const CancelToken& stop);  // its requests stop with `stop`
  int fail(const Error& error);

  // Progress where operators look (manager/progress_reporter): at each phase boundary the state annotation
  // on the node, written now or with the node patch or the wait that follows (see state_write()).
  void enter(Phase phase, StateWrite write = StateWrite::kNow);
  void count_phase();  // what left the node during the phase that ends now

  const Settings& settings_;
  // The API server; every request goes through a view that names the token that stops it: run_requests_,
  // the node writers' own, the cleanup's (CleanupContext), the lease's.
  kube::Api& connection_;
  host::Host& host_;
  const Clock& clock_;
  CancelToken cancel_;            // the run's: SIGTERM
  kube::StoppedBy run_requests_;  // the requests of the run's steps: SIGTERM stops them
  // The newest node seen: the guarded writes (lease, taint, cordon) start from it, under its lock.
  KnownNode known_node_;
  NodeOps node_;    // the run's node writes (labels, cordon, folded writes), stopped by SIGTERM
  TaintOps taint_;  // the run's GPU client taint writes, stopped by SIGTERM
  PodWatch pods_;
  DrainContext ctx_;  // the eviction and the drain, stopped by SIGTERM
  UndoList undo_;     // what this run (or a crashed one it adopted) changed; non-empty = modified
  // Annotated third-party GPU clients and their taint; start_from_leased_node() gives it the label pause,
  // the node as last seen and the own pod's refusal, before adopt_leftovers() and the steps that use it.
  GpuClientReset gpu_clients_;
  StepEnv env_;  // what the steps that are functions over it run with (step_env.h)

  FlowSteps flow_;  // the path and its steps
  std::vector<OperandSpec> table_;
  Snapshot snapshot_;
  OperandLabels labels_{settings_, snapshot_, table_};  // their templates, record and restore
  Duration cleanup_budget_ = std::chrono::seconds(25);  // SIGTERM: the pod's grace period minus a margin
  // The restore after a failure without SIGTERM: no undo action starts after it, and its requests are tried
  // through an API server outage until then.
  static constexpr Duration kRestoreBudget = std::chrono::minutes(10);
  // Held from the first write to the end of the run: made by wait_for_lease(), before any step.
  std::optional<NodeLease> lease_;
  RunContext run_;  // what the steps hand on to each other (execute() gives it to each)

  ProgressReporter reporter_;
  std::optional<Phase> failed_in_;  // the phase a failure or SIGTERM ended
  PhaseTally tally_;                // what left the node during each phase
  // What the steps that are functions over it share with the run (run_services.h).
  RunServices services_{.flow = flow_,
                        .undo = undo_,
                        .progress = reporter_.progress(),
                        .labels = labels_,
                        .pause_labels = [this](const nlohmann::json& labels,
                                               FirstWrite& first) { return pause_labels(labels, first); },
                        .undo_changes = [this] { return undo_changes(); },
                        .enter = [this](Phase phase) { enter(phase); }};
};

}  // namespace dm::manager
