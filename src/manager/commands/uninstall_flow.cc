// The flow of a run: reads, preflight, lease, the decided steps in order, progress, failure and cleanup.
#include "manager/commands/uninstall_flow.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <utility>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "kube/retry.h"
#include "manager/commands/cleanup.h"
#include "manager/commands/command.h"
#include "manager/commands/env_steps.h"
#include "manager/commands/preflight.h"
#include "manager/commands/progress.h"
#include "manager/commands/step_def.h"
#include "manager/pods/dra_evidence.h"
#include "manager/pods/drain.h"
#include "manager/pods/kept_off.h"
#include "manager/pods/waits.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

namespace {

// The first request tells whether the configuration, the node name and the permissions are right; say
// which one is wrong.
std::string explain_node_get_error(const Error& e, const Settings& s, const kube::Config& config) {
  if (e.not_found()) {
    return "node \"" + s.node_name +
           "\" not found: set NODE_NAME (--node-name) to the name of this Kubernetes node (" + e.message +
           ")";
  }
  if (e.forbidden()) {
    return "not allowed to read node \"" + s.node_name + "\" with " + config.source +
           ": bind the service account to the ClusterRole of deploy/clusterrole.yaml (" + e.message + ")";
  }
  if (e.http_status == 401) {
    return "the API server rejected the credentials of " + config.source + " (" + e.message + ")";
  }
  return "cannot read node \"" + s.node_name + "\" from " + config.server + " (" + config.source +
         "): " + e.message;
}

// Fires a token when the scope it guards ends, however it ends.
class FireOnExit {
 public:
  explicit FireOnExit(CancelToken token) : token_(std::move(token)) {}
  ~FireOnExit() { token_.cancel(); }
  FireOnExit(const FireOnExit&) = delete;
  FireOnExit& operator=(const FireOnExit&) = delete;

 private:
  CancelToken token_;
};

}  // namespace

int Uninstall::run(const kube::Config& config) {
  const int code = run_to_end(config);
  // SIGTERM reached the run: 143, whatever ended it first (docs/behaviour.md, Commands and exit codes).
  return code != kExitOk && cancel_.cancelled() ? kExitTerminated : code;
}

int Uninstall::run_to_end(const kube::Config& config) {
  spdlog::info("Starting driver uninstallation process");
  pods_.begin();  // the pod list goes out beside the node's GET
  auto node = node_.get();
  if (!node) {
    const std::string why = explain_node_get_error(node.error(), settings_, config);
    if (cancel_.cancelled()) {
      spdlog::warn("Terminated by SIGTERM before the node was read: {}", why);
      return kExitTerminated;
    }
    spdlog::critical("{}", why);
    return kExitFailed;
  }
  table_ = operand_table(settings_.node_label_for_gpu_pod_eviction);
  snapshot_ = take_snapshot(*node, table_);
  // The permissions the run needs are asked while the pods are listed; the answer is read in preflight().
  // The review has a token of its own, fired when this function returns: a run that ends before it reads
  // the answer (or on a path that never reads it) does not wait for the API server to give one.
  const CancelToken stop_access = cancel_.child();
  std::future<Status> access =
      std::async(std::launch::async,
                 [this, stop_access, checks = uninstall_access_checks(settings_, snapshot_.dra_on())] {
                   kube::StoppedBy requests(connection_, stop_access);
                   return check_access(requests, checks);
                 });
  const FireOnExit end_access(stop_access);  // destroyed before `access`, whose end it waits for
  // Listing pods is the other permission every path needs: check it before anything is written.
  if (auto w = pods_.start(Deadline::after(clock_, std::chrono::seconds(60)), cancel_); !w) {
    spdlog::critical("{}{}", w.error().message,
                     w.error().forbidden()
                         ? " (bind the service account to the ClusterRole of deploy/clusterrole.yaml)"
                         : "");
    return cancel_.cancelled() ? kExitTerminated : kExitFailed;
  }
  FlowInputs in;
  // A driver installed on the host itself makes the containerized driver unnecessary.
  if (auto version = host_.host_driver_version()) {
    spdlog::info("Host driver detected: {}", *version);
    in.host_driver = true;
  } else if (auto ended = prepare(access, *node, in)) {
    return *ended;
  }
  decide(in);
  return conclude(execute());
}

// Before the steps of a path that changes the node: what stops the run before any write, the lease, the
// leftovers of an earlier run, and what the path is decided from (into `in`). An exit code: the run ended
// here.
std::optional<int> Uninstall::prepare(std::future<Status>& access, const nlohmann::json& first_look,
                                      FlowInputs& in) {
  // A driver the kernel can never unload (built in, no module unloading) fails before any write, unless
  // the loaded driver is the desired one and would be kept.
  if (auto u = host_.can_unload_nvidia(); !u) {
    if (refuse_for_unloadable_driver(u, read_skip_decision(settings_, host_))) return fail(u.error());
    spdlog::info("{}; the loaded driver matches the desired configuration and will be kept",
                 u.error().message);
  }
  // Everything knowable up front is checked before the first write (the lease).
  if (auto p = preflight(access, first_look); !p) {
    spdlog::critical("{}", p.error().message);
    return cancel_.cancelled() ? kExitTerminated : kExitFailed;
  }
  // One run per node: another run's taint, cordon and paused labels are never taken for a crash's leftovers.
  auto leased = wait_for_lease(first_look);
  if (!leased) return lease_not_taken(leased.error());
  // The node as it is now that no other run changes it (a run that held the lease may just have ended).
  const nlohmann::json& node = *leased;
  start_from_leased_node(node);
  const LeftoverTaint taint =
      host_.module_loaded("nvidia") ? LeftoverTaint::kKeepUntilUnload : LeftoverTaint::kRemoveNow;
  if (auto a = adopt_leftovers(node, taint); !a) return fail(a.error());
  in = path_inputs();
  return std::nullopt;
}

// The lease was not taken (another run holds it, or a write failed): the run ends before it changed anything.
int Uninstall::lease_not_taken(const Error& error) {
  spdlog::critical("{}", error.message);
  if (!cancel_.cancelled()) return kExitFailed;
  // A write cut short by SIGTERM may still have been applied: let go of the lease if it is ours, within the
  // cleanup's budget (a token of the release's own: SIGTERM has fired already).
  release_lease(CancelToken().child_until(clock_, Deadline::after(clock_, cleanup_budget_)));
  return kExitTerminated;
}

// From the node as the lease found it: the snapshot again (the DaemonSet templates read before stay), the
// record of paused labels, the state written at each wait, the GPU-client reset.
void Uninstall::start_from_leased_node(const nlohmann::json& node) {
  known_node_.remember(node);
  pods_.set_wait_observer([this](const WaitStatus& st, bool started) { reporter_.on_wait(st, started); });
  auto templates = std::move(snapshot_.daemonset_templates);
  snapshot_ = take_snapshot(node, table_);
  snapshot_.daemonset_templates = std::move(templates);
  labels_.start_from(node);
  log_snapshot();
  gpu_clients_.use_label_pause(std::make_shared<const LabelPause>(label_pause(snapshot_, table_)));
  gpu_clients_.use_known_node(&known_node_);
  if (run_.own_pod.taint_refusal) gpu_clients_.refuse_to_taint(*run_.own_pod.taint_refusal);
}

// Our pod: by POD_NAME or HOSTNAME, else by the UID its own cgroup names (HOSTNAME is the node's name under
// driver.hostNetwork, and a ClusterPolicy env entry cannot carry the downward API).
Result<std::optional<OwnPod>> Uninstall::locate_own_pod(const std::optional<OwnPodRef>& ref) {
  auto own = find_own_pod(run_requests_, ref);
  if (!own || own->has_value()) return own;
  const auto uid = host_.own_pod_uid();
  if (!uid) return own;
  auto by_uid = find_own_pod_by_uid(run_requests_, settings_.node_name, *uid);
  if (by_uid && by_uid->has_value()) {
    spdlog::info(
        "Own pod {} found by the pod UID {} of this program's cgroup ({} names no pod)", (*by_uid)->ref, *uid,
        ref ? ref->ns + "/" + ref->name + " from " + ref->source : std::string("no POD_NAME or HOSTNAME"));
  }
  return by_uid;
}

// Our pod (if any): it must tolerate the gpu-client taint, and its grace period bounds the SIGTERM cleanup.
// Then the permissions the run needs: `access`, the API server's answer to the access review.
Status Uninstall::preflight(std::future<Status>& access, const nlohmann::json& node) {
  const auto ref = own_pod_ref(settings_.pod_name, settings_.pod_namespace, settings_.hostname,
                               settings_.operator_namespace);
  auto own = locate_own_pod(ref);
  if (!own) return own.error();
  // The taint and kept-off checks below judge DaemonSet pods by their templates, as the pause will.
  if (host_.module_loaded("nvidia")) read_daemonset_templates();
  if (!own->has_value()) {
    spdlog::info(
        "Own pod not found ({}): not running in a pod, skipping the toleration check; SIGTERM cleanup "
        "budget {}",
        ref ? ref->ns + "/" + ref->name + " from " + ref->source : std::string("no POD_NAME or HOSTNAME"),
        format_duration(cleanup_budget_, DurationStyle::kWholeSeconds));
  } else {
    const OwnPod& own_pod = run_.own_pod.pod.emplace(std::move(**own));
    cleanup_budget_ = cleanup_budget(own_pod.grace_period);
    spdlog::info("Running in pod {} (terminationGracePeriodSeconds {}): SIGTERM cleanup budget {}",
                 own_pod.ref, std::chrono::duration_cast<std::chrono::seconds>(own_pod.grace_period).count(),
                 format_duration(cleanup_budget_, DurationStyle::kWholeSeconds));
    if (auto taint = parse_taint(settings_.gpu_client_taint); taint) {
      if (auto refusal = check_tolerates_taint(own_pod, *taint)) {
        const auto none = why_no_taint(node, *taint);
        if (!none) return *refusal;
        spdlog::info(
            "This pod ({}) does not tolerate the GPU client taint {}; going on, as this run adds no taint: "
            "{} "
            "(a GPU client bound before the reset makes the reset refuse instead of tainting the node)",
            own_pod.ref, taint->to_string(), *none);
        run_.own_pod.taint_refusal = Error(fmt::format(
            "refusing to taint node {} with {} for GPU client pods that arrived after the start: this pod "
            "({}) "
            "does not tolerate it, so if it were deleted while the taint is on nothing would remove the "
            "taint; "
            "add the toleration {{key: {}, operator: Exists, effect: {}}} to the driver DaemonSet or set "
            "GPU_CLIENT_TAINT to a taint the pod tolerates",
            settings_.node_name, taint->to_string(), own_pod.ref, taint->key, taint->effect));
      }
    }
  }
  if (host_.module_loaded("nvidia")) {
    const auto pause = std::make_shared<const LabelPause>(label_pause(snapshot_, table_));
    warn_clients_nothing_keeps_off(settings_.node_name,
                                   clients_nothing_keeps_off(settings_, node, pods_.snapshot(), pause));
  }
  return access.get();
}

// Before the first write, from the first look of the pod watch: the driver is loaded (the clients are reset
// only then), no taint with the key and effect is on the node, and there is a client to reset.
std::optional<std::string> Uninstall::why_no_taint(const nlohmann::json& node,
                                                   const kube::Taint& taint) const {
  if (!host_.module_loaded("nvidia")) return "no NVIDIA driver is loaded, so no GPU client is reset";
  if (decide_taint_add(node, taint).outcome != TaintOutcome::kAdded)
    return "the node already has a taint with its key and effect";
  const auto pause = std::make_shared<const LabelPause>(label_pause(snapshot_, table_));
  if (!clients_need_taint(settings_, pods_.snapshot(), pause)) return "no GPU client pod to reset";
  return std::nullopt;
}

std::string Uninstall::own_pod_name() const {
  if (settings_.pod_name.empty()) return {};
  return (settings_.pod_namespace.empty() ? settings_.operator_namespace : settings_.pod_namespace) + "/" +
         settings_.pod_name;
}

// The run's state annotation ends with the lease, in the same patch, on every way out.
void Uninstall::release_lease(const CancelToken& stop) {
  reporter_.stop();  // no state write may land after the release removes the annotation
  if (!lease_) return;
  if (auto r = lease_->release(stop, {std::string(kStateAnnotation)}); !r)
    spdlog::warn("{}", r.error().message);
}

namespace {

size_t loaded_modules(const host::Host& host) {
  size_t n = host.module_loaded("nouveau") ? 1 : 0;
  for (auto m : host::kNvidiaModules) n += host.module_loaded(m) ? 1 : 0;
  return n;
}

}  // namespace

void Uninstall::count_phase() {
  tally_.count(reporter_.progress(), pods_.snapshot(), loaded_modules(host_), run_.evicted);
}

void Uninstall::enter(Phase phase, StateWrite write) {
  count_phase();
  spdlog::debug("Phase {}", phase_name(phase));
  reporter_.begin(phase, write);
}

// Everything the run started beside its main line ends before its last words: the pod watch, the progress
// writer and the lease renewal are cancelled whatever retry budget their requests are in, and joined.
void Uninstall::end_side_work() {
  pods_.stop();
  reporter_.stop(PendingWrites::kCancel);
  lease_.reset();  // stops renewing; the release (if it was taken) is behind the run already
}

void Uninstall::finish(int exit_code) {
  end_side_work();
  count_phase();
  reporter_.progress().end();
  for (const auto& what : undo_.kept()) reporter_.progress().add_kept(what);
  std::string outcome;
  const std::string where = failed_in_ ? fmt::format(" in phase {}", phase_name(*failed_in_)) : "";
  if (exit_code == kExitOk) {
    outcome = "node prepared for the driver installation";
  } else if (exit_code == kExitTerminated) {
    outcome = "terminated by SIGTERM" + where;
  } else {
    outcome = "failed" + where;
  }
  const std::string line = reporter_.progress().summary(outcome);
  if (exit_code == kExitOk) {
    // After the run: a SIGTERM from here on does not cut its last word short.
    NodeOps after_run(connection_, clock_, CancelToken(), settings_.node_name);
    after_run.event("NodePreparedForDriver", "driver-manager: " + line, "Normal");
    spdlog::info("{}", line);
  } else {
    spdlog::error("{}", line);
  }
}

int Uninstall::fail(const Error& error) {
  const bool terminated = cancel_.cancelled();
  failed_in_ = reporter_.progress().current();
  if (terminated) spdlog::warn("Received SIGTERM: restoring the node before exiting");
  // The run's requests stop with SIGTERM; the cleanup's and the lease release's go through writers of the
  // cleanup's own, whose token fires when the restore's budget runs out: under SIGTERM the grace period's
  // (the kubelet kills the container when it ends), else the restore's own, cut down to the grace period's
  // if SIGTERM comes meanwhile. Until then a request the API server does not answer is tried again (an
  // outage is ridden out).
  const Deadline deadline = Deadline::after(clock_, terminated ? cleanup_budget_ : kRestoreBudget);
  CleanupContext cleanup(connection_, clock_,
                         cleanup_token(clock_, deadline, cancel_, terminated, cleanup_budget_),
                         settings_.node_name, known_node_);
  const kube::RequestDeadline restore(deadline);
  forget_changes_not_made(cleanup.node());
  if (!undo_.empty()) {
    // The cleanup records its own Warning Event; under SIGTERM its budget is for the undo alone.
    if (terminated) {
      count_phase();
      reporter_.progress().begin(Phase::kCleanupOnFailure);
    } else {
      enter(Phase::kCleanupOnFailure, StateWrite::kNow);
    }
    cleanup_on_failure({settings_, cleanup.writers(), snapshot_.policy_enabled(), undo_, clock_, deadline},
                       error);
  } else {
    cleanup.node().event("DriverUninstallFailed", "driver-manager failed: " + error.message, "Warning");
  }
  release_lease(cleanup.cancel());
  spdlog::critical("{}", error.message);
  return terminated ? kExitTerminated : kExitFailed;
}

void Uninstall::log_snapshot() const {
  spdlog::info("Fetching current component labels");
  for (const auto& op : table_) {
    if (op.label_key == settings_.node_label_for_gpu_pod_eviction) {
      spdlog::info("Getting current value of the \"{}\" node label used by custom operands", op.label_key);
    } else {
      spdlog::info("Getting current value of the \"{}\" node label", op.label_key);
    }
    spdlog::info("Current value of \"{}\"={}", op.label_key, snapshot_.value(op.label_key));
  }
  spdlog::info("Current value of AUTO_UPGRADE_POLICY_ENABLED={}", snapshot_.upgrade_annotation);
}

Status Uninstall::check_cancelled() const {
  if (cancel_.cancelled()) return Error("terminated by SIGTERM");
  return ok_status();
}

// What the path of a run that changes the node is decided from (the host driver is ruled out already).
FlowInputs Uninstall::path_inputs() {
  const bool policy = snapshot_.policy_enabled();
  if (policy) {
    spdlog::info("Auto upgrade policy of the GPU driver on the node is enabled");
    spdlog::info(
        "GPU pod eviction by driver-manager has been superseded by the GPU Operator's upgrade policy. The "
        "GPU "
        "Operator will perform the workload eviction instead");
    spdlog::info(
        "Auto drain by driver-manager has been superseded by the GPU Operator's upgrade policy. The GPU "
        "Operator will perform the GPU node drain instead");
  } else {
    spdlog::info("Auto upgrade policy of the GPU driver on the node is disabled");
  }
  FlowInputs in{.nvidia_loaded = host_.module_loaded("nvidia"),
                .upgrade_policy = policy,
                .dra_label = snapshot_.dra_on()};
  // Decided before the pause, logged where upstream logs it (after the operand wait): it reads settings and
  // the driver's state file, which nothing in between changes, and the skip path cordons and evicts nothing.
  if (in.nvidia_loaded) run_.skip = read_skip_decision(settings_, host_);
  in.skip = run_.skip.skip;
  return in;
}

// The path and its steps (manager/commands/flow_steps), every path alike. DRA in use without the
// operator's label is looked for only where it changes the steps (flow_facts asks then).
void Uninstall::decide(const FlowInputs& in) {
  const FlowFacts facts = flow_facts(settings_, in, [this] {
    const auto evidence = read_dra_evidence(run_requests_, settings_.node_name, false, pods_.snapshot(),
                                            api_pod_facts(run_requests_));
    return log_dra_in_use(settings_.node_name, evidence);
  });
  flow_ = decide_steps(facts);
}

// The end of every path, by its row (flow_steps.cc): a failure restores the node where the path holds the
// lease and is logged only where it does not. A SIGTERM during the write that ends the run did not stop it
// (the node is restored): still a SIGTERM.
int Uninstall::conclude(const Status& s) {
  const PathEnds& ends = path_ends(flow_.path);
  if (!ends.restores) {
    if (s) return ends.done_is_failure ? kExitFailed : kExitOk;
    if (cancel_.cancelled()) {
      spdlog::warn("{}", s.error().message);
      return kExitTerminated;
    }
    spdlog::critical("{}", s.error().message);
    return kExitFailed;
  }
  if (!s) return fail(s.error());
  if (cancel_.cancelled()) return fail(Error("terminated by SIGTERM"));
  // Done: a SIGTERM from here on must not cut the release (and the last Event, finish()) short.
  release_lease(CancelToken());
  return ends.done_is_failure ? kExitFailed : kExitOk;
}

// Each path: docs/behaviour.md, The paths. Each step through its row (step_def.h): a cancellation check
// before it and, where the phase changes, the phase boundary, unless the row says otherwise. A step that has
// nothing to do at run time is passed over (the full-drain fallback) or runs without opening its phase (the
// DRA plugin clients, when there are none).
Status Uninstall::execute() {
  const PathEnds& ends = path_ends(flow_.path);
  if (!ends.start_line.empty()) spdlog::info("{}", ends.start_line);
  // The late-arrival looks of evict-late-arrivals and unload-driver share what the first one found.
  run_.late.emplace(ctx_, gpu_clients_, flow_.evict_workloads,
                    operand_pods(pause_waits(snapshot_, table_), settings_.operator_namespace));
  StepCall call{env_, run_, services_};
  for (const auto& [step, phase] : flow_.steps) {
    const StepDef& d = step_def(step);
    if (d.needed != nullptr && !d.needed(run_)) continue;
    if (!d.report) {
      const bool opens = d.opens_phase == nullptr || d.opens_phase(env_);
      if (phase && phase != reporter_.progress().current() && opens) enter(*phase, state_write_for(*phase));
      if (d.before_check != nullptr) d.before_check(call);
      if (auto c = check_cancelled(); !c) return c;
      if (!d.carries_first_write) {
        if (auto l = take_lease_if_pending(run_.first_write); !l) return l;
      }
    }
    if (auto s = d.run(call); !s) return s;
  }
  if (ends.done_is_failure) {
    spdlog::critical("{}", ends.done_line);
  } else if (!ends.done_line.empty()) {
    spdlog::info("{}", ends.done_line);
  }
  return ok_status();
}

}  // namespace dm::manager
