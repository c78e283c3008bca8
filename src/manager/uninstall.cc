// The uninstall_driver flow as named steps (docs/behaviour.md walks through them): one node GET for the
// snapshot, cordon ownership, one deadline for all operand waits, an undo list that every change to the node
// registers with and that every exit path runs, and SIGTERM handled like a failure (exit 143).
#include "manager/uninstall.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "kube/objects.h"
#include "manager/cleanup.h"
#include "manager/drain.h"
#include "manager/flow.h"
#include "manager/gpu_clients.h"
#include "manager/holders.h"
#include "manager/known_node.h"
#include "manager/lease.h"
#include "manager/operands.h"
#include "manager/own_pod.h"
#include "manager/paused_record.h"
#include "manager/pod_rules.h"
#include "manager/preflight.h"
#include "manager/progress.h"
#include "manager/skip.h"
#include "manager/undo.h"
#include "manager/waits.h"

namespace dm::manager {

namespace {

// Fires `token` once `deadline` passes (until destroyed): bounds the retries of the cleanup's requests.
class CancelAtDeadline {
 public:
  CancelAtDeadline(const Clock& clock, Deadline deadline, const CancelToken& token)
      : thread_([this, &clock, deadline, token] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_ && !deadline.passed(clock)) {
            cv_.wait_for(lock, std::min<Duration>(deadline.remaining(clock), std::chrono::milliseconds(200)));
          }
          if (!done_) token.cancel();
        }) {}
  ~CancelAtDeadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  CancelAtDeadline(const CancelAtDeadline&) = delete;
  CancelAtDeadline& operator=(const CancelAtDeadline&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members above exist
};

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitTerminated = 143;

// The one piece of global state: written by the SIGTERM handler, read through a CancelToken.
std::atomic<bool> g_terminated{false};

extern "C" void on_sigterm(int /*sig*/) {
  g_terminated.store(true);
}

void install_sigterm_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

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

class Uninstall {
 public:
  Uninstall(const Settings& settings, kube::Client& client, host::Host& host, const Clock& clock,
            CancelToken cancel)
      : settings_(settings),
        client_(client),
        host_(host),
        clock_(clock),
        cancel_(std::move(cancel)),
        node_(client, clock, cancel_, settings.node_name),
        pods_(client, clock, settings.node_name),
        ctx_{settings, client, host, clock, cancel_, node_, pods_},
        progress_(clock) {
    node_.use_known_node(&known_node_);
  }

  int run(const kube::Config& config);
  // The last words of a run, whatever its exit code: the summary line (and on success a Normal Event).
  void finish(int exit_code);

 private:
  // Paths of the flow (each returns when the run is over: ok = exit 0).
  Status main_path();
  Status no_driver_path();
  Status skip_path();
  int pre_installed_path(const std::string& version);

  // Steps.
  Status adopt_leftovers(const nlohmann::json& node, bool will_unload);
  Status pause_operands();
  Status take_gpu_users_off(bool with_workloads);
  bool skip_uninstall(const SkipDecision& d);
  Status evict_workloads(const CancelToken& stop, const std::vector<OperandWait>& beside);
  Status drain_after_failed_eviction();
  Status reset_dra_plugin_gpu_clients();
  Status drain_dra_plugin();
  Status uninstall_driver_components();
  Status cleanup_driver();
  Status unbind_vfio();
  Status wait_for_mofed();
  Status undo_changes();
  Status unload_nouveau();
  Status remove_stale_driver_root();

  Status cordon();
  void register_uncordon();
  void register_legacy_uncordon();
  void register_label_restore();
  Status restore_labels();
  Status pause_labels(const nlohmann::json& labels);
  NodeOps& undo_node() { return undo_node_ != nullptr ? *undo_node_ : node_; }
  Status check_cancelled() const;
  Deadline operand_deadline() const;
  void log_snapshot() const;
  Status preflight(std::future<Status>& access);
  [[nodiscard]] std::string own_pod_name() const;
  void release_lease();
  int fail(const Error& error);

  // Progress where operators look (manager/progress): at each phase boundary the state annotation on the
  // node (`ride_along`: written with the node patch or the wait that follows at once) and a Normal Event.
  void enter(Phase phase, bool ride_along = false, bool event = true);
  void count_phase();  // what left the node during the phase that ends now
  void write_state();
  void on_wait(const WaitStatus& status, bool started);

  const Settings& settings_;
  kube::Client& client_;
  host::Host& host_;
  const Clock& clock_;
  CancelToken cancel_;
  KnownNode known_node_;  // the newest node seen: the guarded writes (lease, taint, cordon) start from it
  NodeOps node_;
  PodWatch pods_;
  FlowContext ctx_;

  std::vector<OperandSpec> table_;
  Snapshot snapshot_;
  PausedRecord paused_record_;  // on the node: what this run (or a crashed one) paused, value before
  bool eviction_enabled_ = false;
  bool auto_drain_enabled_ = false;
  UndoList undo_;                 // what this run (or a crashed one it adopted) changed; non-empty = modified
  NodeOps* undo_node_ = nullptr;  // during cleanup: node writes that SIGTERM does not cancel
  Duration cleanup_budget_ = std::chrono::seconds(25);  // SIGTERM: the pod's grace period minus a margin
  std::optional<GpuClientReset> gpu_clients_;           // annotated third-party GPU clients and their taint
  std::optional<OwnPod> own_pod_;                       // the pod this program runs in, when found
  std::optional<NodeLease> lease_;                      // held from the first write to the end of the run

  RunProgress progress_;
  std::optional<Phase> failed_in_;          // the phase a failure or SIGTERM ended
  std::map<std::string, bool> phase_pods_;  // UIDs on the node when the current phase began -> GPU client
  std::set<std::string> workload_uids_;     // GPU workloads evicted beside the operand wait
  bool drain_pending_ = false;              // the GPU-workload eviction failed: the full drain follows
  size_t phase_modules_ = 0;                // NVIDIA (and nouveau) modules loaded then
  std::mutex state_mu_;                     // waits report from the thread that waits
  bool state_pending_ = false;  // the current phase's state rides along with the next patch or wait
  bool state_write_failed_ = false;
  std::optional<TimePoint> wait_written_at_;  // last state write from a long wait
  std::vector<std::string> wait_written_;     // what it named
};

int Uninstall::run(const kube::Config& config) {
  spdlog::info("Starting driver uninstallation process");
  pods_.begin();  // the pod list goes out beside the node's GET
  auto node = node_.get();
  if (!node) {
    spdlog::critical("{}", explain_node_get_error(node.error(), settings_, config));
    return kExitFailed;
  }
  table_ = operand_table(settings_.node_label_for_gpu_pod_eviction);
  snapshot_ = take_snapshot(*node, table_);
  // The permissions the run needs are asked while the pods are listed; the answer is read in preflight().
  std::future<Status> access =
      std::async(std::launch::async, [this, checks = uninstall_access_checks(settings_, snapshot_.dra_on())] {
        return check_access(client_, checks);
      });

  // Listing pods is the other permission every path needs: check it before anything is written.
  if (auto w = pods_.start(Deadline::after(clock_, std::chrono::seconds(60)), cancel_); !w) {
    spdlog::critical("{}{}", w.error().message,
                     w.error().forbidden()
                         ? " (bind the service account to the ClusterRole of deploy/clusterrole.yaml)"
                         : "");
    return cancel_.cancelled() ? kExitTerminated : kExitFailed;
  }

  // A driver installed on the host itself makes the containerized driver unnecessary.
  if (auto version = host_.host_driver_version()) return pre_installed_path(*version);
  // A driver the kernel can never unload (built in, no module unloading) fails before any write, unless
  // the loaded driver is the desired one and would be kept.
  if (auto u = host_.can_unload_nvidia(); !u) {
    if (refuse_for_unloadable_driver(u, decide_skip_uninstall(settings_, host_))) return fail(u.error());
    spdlog::info("{}; the loaded driver matches the desired configuration and will be kept",
                 u.error().message);
  }

  // Everything knowable up front is checked before the first write (the lease).
  if (auto p = preflight(access); !p) {
    spdlog::critical("{}", p.error().message);
    return cancel_.cancelled() ? kExitTerminated : kExitFailed;
  }
  // One run per node: another run's taint, cordon and paused labels are never taken for a crash's leftovers.
  lease_.emplace(client_, clock_, settings_.node_name,
                 lease_holder_identity(own_pod_ ? own_pod_->ref : own_pod_name(), settings_.hostname));
  auto leased = lease_->acquire(cancel_, &*node);
  if (!leased) {
    spdlog::critical("{}", leased.error().message);
    if (!cancel_.cancelled()) return kExitFailed;
    // A write cut short by SIGTERM may still have been applied: let go of the lease if it is ours.
    const CancelToken budget;
    const CancelAtDeadline watchdog(clock_, Deadline::after(clock_, cleanup_budget_), budget);
    client_.set_cancel(budget);
    release_lease();
    return kExitTerminated;
  }
  // The node as it is now that no other run changes it (a run that held the lease may just have ended).
  node = std::move(*leased);
  known_node_.remember(*node);
  pods_.set_wait_observer([this](const WaitStatus& st, bool started) { on_wait(st, started); });
  snapshot_ = take_snapshot(*node, table_);
  bool malformed_record = false;
  paused_record_ = paused_record_of(*node, &malformed_record);
  if (malformed_record) {
    spdlog::warn("Ignoring the unreadable {} annotation of node {}", kPausedLabelsAnnotation,
                 settings_.node_name);
  }

  log_snapshot();
  gpu_clients_.emplace(client_, pods_, clock_, cancel_, settings_, undo_,
                       label_handled_client_keys(snapshot_, settings_.node_label_for_gpu_pod_eviction));
  gpu_clients_->use_known_node(&known_node_);
  if (auto a = adopt_leftovers(*node, host_.module_loaded("nvidia")); !a) return fail(a.error());

  Status s = main_path();
  if (!s) return fail(s.error());
  // Done: a SIGTERM from here on must not cut the release (and the last Event) short.
  client_.set_cancel(CancelToken());
  release_lease();
  return kExitOk;
}

// Our pod (if any): it must tolerate the gpu-client taint, and its grace period bounds the SIGTERM cleanup.
// Then the permissions the run needs: `access`, the API server's answer to the access review.
Status Uninstall::preflight(std::future<Status>& access) {
  const auto ref = own_pod_ref(settings_.pod_name, settings_.pod_namespace, settings_.hostname,
                               settings_.operator_namespace);
  auto own = find_own_pod(client_, ref);
  if (!own) return own.error();
  if (!own->has_value()) {
    spdlog::info(
        "Own pod not found ({}): not running in a pod, skipping the toleration check; SIGTERM cleanup "
        "budget {}",
        ref ? ref->ns + "/" + ref->name + " from " + ref->source : std::string("no POD_NAME or HOSTNAME"),
        format_duration(cleanup_budget_));
  } else {
    own_pod_ = std::move(**own);
    cleanup_budget_ = cleanup_budget(own_pod_->grace_period);
    spdlog::info("Running in pod {} (terminationGracePeriodSeconds {}): SIGTERM cleanup budget {}",
                 own_pod_->ref,
                 std::chrono::duration_cast<std::chrono::seconds>(own_pod_->grace_period).count(),
                 format_duration(cleanup_budget_));
    if (auto taint = parse_taint(settings_.gpu_client_taint); taint) {
      if (auto refusal = check_tolerates_taint(*own_pod_, *taint)) return *refusal;
    }
  }
  return access.get();
}

std::string Uninstall::own_pod_name() const {
  if (settings_.pod_name.empty()) return {};
  return (settings_.pod_namespace.empty() ? settings_.operator_namespace : settings_.pod_namespace) + "/" +
         settings_.pod_name;
}

// The run's state annotation ends with the lease, in the same patch, on every way out.
void Uninstall::release_lease() {
  if (!lease_) return;
  if (auto r = lease_->release({std::string(kStateAnnotation)}); !r) spdlog::warn("{}", r.error().message);
}

namespace {

size_t loaded_modules(const host::Host& host) {
  size_t n = host.module_loaded("nouveau") ? 1 : 0;
  for (auto m : host::kNvidiaModules) n += host.module_loaded(m) ? 1 : 0;
  return n;
}

}  // namespace

void Uninstall::count_phase() {
  const auto phase = progress_.current();
  std::map<std::string, bool> now;  // UID -> an annotated GPU client
  for (const auto& p : pods_.snapshot()) {
    now.emplace(kube::uid(*p), gpu_client_designation(*p) == ClientDesignation::kClient);
  }
  const size_t modules = loaded_modules(host_);
  if (phase) {
    size_t gone = 0;
    size_t clients = 0;
    size_t workloads = 0;
    for (const auto& [uid, client] : phase_pods_) {
      if (now.contains(uid)) continue;
      // During pause-operands the clients are reset, and the GPU workloads evicted, side by side with the
      // operand wait: each is counted as what it is.
      const bool beside = *phase == Phase::kPauseOperands;
      if (beside && client) {
        ++clients;
      } else if (beside && workload_uids_.contains(uid)) {
        ++workloads;
      } else {
        ++gone;
      }
    }
    progress_.add_pods_gone(*phase, gone);
    progress_.add_gpu_clients_reset(clients);
    progress_.add_pods_gone(Phase::kEvictWorkloads, workloads);
    if (phase_modules_ > modules) progress_.add_modules_unloaded(phase_modules_ - modules);
  }
  phase_pods_ = std::move(now);
  phase_modules_ = modules;
}

void Uninstall::enter(Phase phase, bool ride_along, bool event) {
  count_phase();
  progress_.begin(phase);
  spdlog::debug("Phase {}", phase_name(phase));
  {
    std::lock_guard lk(state_mu_);
    state_pending_ = ride_along;
    wait_written_at_.reset();
    wait_written_.clear();
  }
  if (!ride_along) write_state();
  if (event)
    node_.event_in_background(std::string(phase_event_reason(phase)), std::string(phase_description(phase)),
                              "Normal");
}

// One merge patch of the annotation (no resourceVersion: the value is ours alone); best effort - a run
// does not fail because its progress could not be shown.
void Uninstall::write_state() {
  std::lock_guard lk(state_mu_);
  state_pending_ = false;
  const nlohmann::json body = {
      {"metadata", {{"annotations", {{std::string(kStateAnnotation), progress_.annotation_value()}}}}}};
  auto r = client_.patch(kube::paths::node(settings_.node_name), kube::PatchType::kMerge, body);
  if (r) {
    known_node_.remember(*r);
    return;
  }
  if (!state_write_failed_) {
    spdlog::warn("Could not write the {} annotation on node {} (progress stays in the log only): {}",
                 kStateAnnotation, settings_.node_name, r.error().message);
  } else {
    spdlog::debug("Could not write the {} annotation again: {}", kStateAnnotation, r.error().message);
  }
  state_write_failed_ = true;
}

// A wait writes the state it started with if its phase left that to it, and names what it still waits
// for once it has lasted a while (refreshed at most every 30 s, when that changed): short waits, the
// usual case, cost no request.
void Uninstall::on_wait(const WaitStatus& status, bool started) {
  constexpr auto kLongWait = std::chrono::seconds(15);
  constexpr auto kRefresh = std::chrono::seconds(30);
  progress_.set_waiting(status);
  bool write = false;
  {
    std::lock_guard lk(state_mu_);
    const auto now = clock_.now();
    if (started && state_pending_) {
      write = true;
    } else if (status.elapsed >= kLongWait && status.remaining != wait_written_ &&
               (!wait_written_at_ || now - *wait_written_at_ >= kRefresh)) {
      write = true;
      wait_written_at_ = now;
      wait_written_ = status.remaining;
    }
  }
  if (write) write_state();
}

void Uninstall::finish(int exit_code) {
  node_.flush_events();  // the phases' Events are on the API server before the summary's
  count_phase();
  progress_.end();
  std::string outcome;
  const std::string where = failed_in_ ? fmt::format(" in phase {}", phase_name(*failed_in_)) : "";
  if (exit_code == kExitOk) {
    outcome = "node prepared for the driver installation";
  } else if (exit_code == kExitTerminated) {
    outcome = "terminated by SIGTERM" + where;
  } else {
    outcome = "failed" + where;
  }
  const std::string line = progress_.summary(outcome);
  if (exit_code == kExitOk) {
    node_.event("NodePreparedForDriver", "driver-manager: " + line, "Normal");
    spdlog::info("{}", line);
  } else {
    spdlog::error("{}", line);
  }
}

int Uninstall::fail(const Error& error) {
  const bool terminated = cancel_.cancelled();
  failed_in_ = progress_.current();
  if (terminated) spdlog::warn("Received SIGTERM: restoring the node before exiting");
  // The run's requests stop with SIGTERM; the cleanup's and the lease release's are stopped only by the
  // cleanup's budget under SIGTERM (the kubelet kills the container when the grace period ends), else by
  // their own retries.
  const CancelToken cleanup_cancel;
  std::optional<CancelAtDeadline> watchdog;
  const Deadline deadline = terminated ? Deadline::after(clock_, cleanup_budget_) : Deadline::none();
  if (terminated) watchdog.emplace(clock_, deadline, cleanup_cancel);
  client_.set_cancel(cleanup_cancel);
  if (!undo_.empty()) {
    // The cleanup records its own Warning Event; under SIGTERM its budget is for the undo alone.
    if (terminated) {
      count_phase();
      progress_.begin(Phase::kCleanupOnFailure);
    } else {
      enter(Phase::kCleanupOnFailure, /*ride_along=*/false, /*event=*/false);
    }
    NodeOps cleanup_node(client_, clock_, cleanup_cancel, settings_.node_name);
    undo_node_ = &cleanup_node;
    cleanup_on_failure({settings_, cleanup_node, snapshot_.policy_enabled(), undo_, clock_, deadline}, error);
    undo_node_ = nullptr;
  } else {
    node_.event("DriverUninstallFailed", "driver-manager failed: " + error.message, "Warning");
  }
  release_lease();
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

Deadline Uninstall::operand_deadline() const {
  return settings_.operand_wait_timeout == Duration::zero()
             ? Deadline::none()
             : Deadline::after(clock_, settings_.operand_wait_timeout);
}

// Runs the steps in order, stopping at the first failure or at SIGTERM.
#define DM_STEP(expr)                                \
  do {                                               \
    if (auto c_ = check_cancelled(); !c_) return c_; \
    if (auto s_ = (expr); !s_) return s_;            \
  } while (false)

Status Uninstall::main_path() {
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
  const auto switches = eviction_switches(settings_, policy);
  eviction_enabled_ = switches.gpu_pod_eviction;
  auto_drain_enabled_ = switches.auto_drain;

  // Each path: docs/behaviour.md, The paths.
  if (!host_.module_loaded("nvidia")) return no_driver_path();

  // Decided before the pause, logged where upstream logs it (after the operand wait): it reads settings and
  // the driver's state file, which nothing in between changes, and the skip path cordons and evicts nothing.
  const SkipDecision skip = decide_skip_uninstall(settings_, host_);
  const bool evict =
      !skip.skip && workload_step_runs({eviction_enabled_, auto_drain_enabled_}, snapshot_.dra_on());
  enter(Phase::kPauseOperands, /*ride_along=*/true);  // with the pause patch
  DM_STEP(pause_operands());
  DM_STEP(take_gpu_users_off(evict));  // operands, annotated gpu clients and GPU workloads go side by side
  if (skip_uninstall(skip)) return skip_path();
  // What is left before the unload: the full drain after a failed eviction, the DRA claim guard and plugins.
  if (drain_pending_ || snapshot_.dra_on() || gpu_clients_->dra_plugin_clients_present())
    enter(Phase::kEvictWorkloads);
  if (drain_pending_) DM_STEP(drain_after_failed_eviction());
  if (snapshot_.dra_on()) DM_STEP(check_dra_claim_holders(ctx_));
  DM_STEP(reset_dra_plugin_gpu_clients());  // third-party DRA plugins go last, like ours
  if (snapshot_.dra_on()) DM_STEP(drain_dra_plugin());
  enter(Phase::kUnloadDriver);
  DM_STEP(uninstall_driver_components());
  DM_STEP(unbind_vfio());
  if (settings_.gpu_direct_rdma_enabled) enter(Phase::kWaitMofed);
  DM_STEP(wait_for_mofed());
  enter(Phase::kRestore);
  DM_STEP(undo_changes());    // our cordon, the taint, the labels, newest first
  DM_STEP(unload_nouveau());  // after the labels: the next run retries it
  spdlog::info("Driver uninstallation completed successfully");
  return ok_status();
}

// Nothing holds a driver that is not loaded, so nothing is evicted (evicting DRA claim holders here
// would deadlock: their unprepare needs the kubelet plugin, which cannot start before the driver is
// installed).
Status Uninstall::no_driver_path() {
  spdlog::info("No NVIDIA driver loaded, skipping eviction of GPU clients and workloads");
  // Nothing is evicted here (a leftover gpu-client taint of ours was removed at the start).
  enter(Phase::kCleanDriverRoot);
  if (snapshot_.dra_on()) DM_STEP(drain_dra_plugin());
  DM_STEP(remove_stale_driver_root());
  DM_STEP(unload_nouveau());
  DM_STEP(unbind_vfio());
  if (settings_.gpu_direct_rdma_enabled) enter(Phase::kWaitMofed);
  DM_STEP(wait_for_mofed());
  enter(Phase::kRestore);
  register_legacy_uncordon();
  DM_STEP(restore_labels());  // labels left paused by a crashed run
  DM_STEP(undo_changes());    // a cordon left by a crashed run
  spdlog::info("Node prepared for the driver installation (no driver was loaded)");
  return ok_status();
}

Status Uninstall::skip_path() {
  spdlog::info(
      "The NVIDIA driver is already loaded with the desired version and configuration, skipping the "
      "uninstallation of the driver in an attempt to not disrupt running workloads");
  // The running plugin bind-mounted the old driver root and would lose its dev/ submounts.
  enter(Phase::kCleanDriverRoot);
  if (snapshot_.dra_on()) DM_STEP(drain_dra_plugin());
  spdlog::info("Cleaning up stale mounts and state files...");
  DM_STEP(remove_stale_driver_root());
  // The clients were bounced with the operands; a cordon of ours left by a crashed run is undone here too.
  enter(Phase::kRestore);
  DM_STEP(undo_changes());
  spdlog::info("Node prepared for the driver installation (driver kept)");
  return ok_status();
}

int Uninstall::pre_installed_path(const std::string& version) {
  spdlog::info("Host driver detected: {}", version);
  spdlog::info("NVIDIA GPU driver is already pre-installed on the node, disabling the containerized driver");
  spdlog::info("Labeling node {} with {}={}", settings_.node_name, kDriverLabel, kPreInstalledValue);
  auto s = node_.update_labels({{std::string(kDriverLabel), std::string(kPreInstalledValue)}});
  if (!s) {
    spdlog::critical("{}", s.error().message);
    return kExitFailed;
  }
  // Gives the DaemonSet controller time to delete this pod, whose nodeSelector no longer matches.
  if (!clock_.sleep_for(settings_.pre_installed_sleep, cancel_)) {
    spdlog::warn("Received SIGTERM while waiting to be removed from the node");
    return kExitTerminated;
  }
  spdlog::critical("driver is pre-installed on host");
  return kExitFailed;
}

// See docs/behaviour.md, Pausing and restoring operand labels. The operand waits run with the client reset.
Status Uninstall::pause_operands() {
  spdlog::info(
      "Shutting down all GPU clients on the current node by disabling their component-specific "
      "nodeSelector labels");
  const auto& custom = settings_.node_label_for_gpu_pod_eviction;
  if (!custom.empty() && !snapshot_.value(custom).empty()) {
    spdlog::info("Shutting down GPU clients using node selector label \"{}\"={}", custom,
                 snapshot_.value(custom));
  }
  const auto body = pause_patch(snapshot_, table_);
  if (patch_has_labels(body)) {
    register_legacy_uncordon();
    register_label_restore();  // before the write: a request that timed out may still have been applied
    if (auto s = pause_labels(body["metadata"]["labels"]); !s) {
      spdlog::error("Failed to evict GPU operator components, attempting cleanup");
      return s.error();
    }
  }
  return ok_status();
}

// The operand waits, the reset of the pods annotated nvidia.com/gpu.client (not DRA plugins) and, when
// `with_workloads`, the cordon and the GPU-workload eviction run side by side: none needs another one's pods
// gone (docs/gpu-clients.md, Clients go while the operands go). All of them end before the skip decision is
// logged; the clients go also on the skip path and with the upgrade policy on (they are clients, not
// workloads). The first to fail stops the others and is the run's error; the taint and the cordon register
// their own undo (the undo list takes registrations from any thread). The client reset runs on this thread,
// the operand wait (it only reads the pod watch) and the workload eviction on their own. A failed eviction
// that falls back to the full drain is no failure here: the drain runs once the others are done, so it
// never evicts a client or an operand that they are still taking off the node.
Status Uninstall::take_gpu_users_off(bool with_workloads) {
  const auto waits = pause_waits(snapshot_, table_);
  const auto& ns = settings_.operator_namespace;
  log_operand_waits_start(pods_, waits, ns);
  const CancelToken stop_wait = cancel_.child();
  const CancelToken stop_clients = cancel_.child();
  const CancelToken stop_workloads = cancel_.child();
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
    waited = await_operands(pods_, waits, ns, operand_deadline(), stop_wait);
    if (!waited) failed(kOperands);
  });
  Status evicted = ok_status();
  std::thread evictor;
  if (with_workloads) {
    evictor = std::thread([&] {
      evicted = evict_workloads(stop_workloads, waits);
      if (!evicted) failed(kWorkloads);
    });
  }
  Status reset = gpu_clients_->reset_clients(stop_clients);
  if (!reset) failed(kClients);
  waiter.join();
  if (evictor.joinable()) evictor.join();
  switch (failed_first.load()) {
    case kClients:
      return reset;
    case kWorkloads:
      return evicted;
    case kOperands: {
      const Error e = operand_wait_failed(pods_, waits, ns, waited.error());
      spdlog::error("Failed to evict GPU operator components, attempting cleanup");
      return e;
    }
    default:
      return ok_status();
  }
}

// Annotated gpu-clients that are DRA kubelet plugins go after the claim-holder guard, before the module
// unload, like the operator's own plugin.
Status Uninstall::reset_dra_plugin_gpu_clients() {
  return gpu_clients_->reset_dra_plugin_clients();
}

// Leftovers of an earlier run that crashed (our taint, our cordon): a path that will unload the driver
// adopts them - they stay on until after the unload, so clients kept away by them cannot come back in
// between - and the other paths undo them now.
Status Uninstall::adopt_leftovers(const nlohmann::json& node, bool will_unload) {
  if (will_unload) {
    gpu_clients_->adopt_leftover_taint(node);
  } else if (auto h = gpu_clients_->heal_leftover_taint(node); !h) {
    return h.error().wrap("failed to remove the GPU client taint left by an earlier run");
  }
  if (!cordoned_by_us(node)) return ok_status();
  if (snapshot_.policy_enabled()) {
    // The upgrade controller owns the cordon while its policy is on: uncordoning would pull the node out
    // from under it. Only our claim on the cordon goes.
    spdlog::info(
        "Node {} carries the {} annotation of an earlier run, but the GPU Operator's upgrade policy is on "
        "and owns the cordon: dropping the annotation, leaving the node's schedulability to the upgrade "
        "controller",
        settings_.node_name, kCordonedAnnotation);
    return node_.drop_cordon_annotation();
  }
  spdlog::info(
      "Node {} was cordoned by an earlier run of driver-manager ({}); it will be uncordoned at the end",
      settings_.node_name, kCordonedAnnotation);
  register_uncordon();
  return ok_status();
}

void Uninstall::register_uncordon() {
  if (settings_.legacy_uncordon) return;  // the legacy uncordon covers it
  undo_.add({"uncordon node " + settings_.node_name,
             [this]() -> Status {
               if (auto u = undo_node().uncordon(false); !u) {
                 return u.error().wrap("failed to uncordon node " + settings_.node_name);
               }
               return ok_status();
             },
             /*required=*/false, "uncordon node"});
}

// UNCORDON_ALWAYS: upstream's rule, uncordon whoever cordoned the node when eviction or drain is enabled.
void Uninstall::register_legacy_uncordon() {
  if (!settings_.legacy_uncordon) return;
  if (snapshot_.policy_enabled() || !(settings_.enable_gpu_pod_eviction || settings_.enable_auto_drain))
    return;
  undo_.add({"uncordon node " + settings_.node_name + " (UNCORDON_ALWAYS)",
             [this]() -> Status { return undo_node().uncordon(true); }, /*required=*/false, "uncordon node"});
}

void Uninstall::register_label_restore() {
  undo_.add({"restore the operand labels of node " + settings_.node_name, [this] { return restore_labels(); },
             /*required=*/true, "reschedule GPU operator components"});
}

// The success path: taint, cordon and labels come back, newest change first.
Status Uninstall::undo_changes() {
  return undo_.run_all(cancel_);
}

// See docs/behaviour.md, Skip-uninstall.
bool Uninstall::skip_uninstall(const SkipDecision& d) {
  if (d.checked) {
    spdlog::info(
        "Checking if the currently loaded NVIDIA driver version and configuration matches the desired "
        "state...");
  }
  if (d.warning) {
    spdlog::warn("{}", d.log_line);
  } else if (!d.log_line.empty()) {
    spdlog::info("{}", d.log_line);
  }
  return d.skip;
}

Status Uninstall::cordon() {
  auto c = node_.cordon();
  if (!c) {
    // A write cut short (SIGTERM, a lost connection) may still have been applied; the uncordon only acts
    // on a cordon carrying our annotation.
    register_uncordon();
    return c.error();
  }
  if (*c != CordonOutcome::kAlreadyCordonedByOther) register_uncordon();
  return ok_status();
}

// See docs/behaviour.md, GPU workload eviction. Runs beside the operand wait and the client reset: the pods
// those take off the node are not this step's, and `stop` fires when one of them fails (its error is then
// the run's, so a stopped eviction logs no failure of its own).
Status Uninstall::evict_workloads(const CancelToken& stop, const std::vector<OperandWait>& beside) {
  if (auto c = cordon(); !c) return c;
  if (stop.cancelled())
    return Error("cancelled before the GPU pods of node " + settings_.node_name + " were evicted");
  const FlowContext ctx{settings_, client_, host_, clock_, stop, node_, pods_};
  const auto& ns = settings_.operator_namespace;
  const TakenBeside taken = [&](const nlohmann::json& pod) -> std::optional<std::string> {
    for (const auto& w : beside) {
      if (pod_matches_wait(pod, w, ns)) return "an operand pod, waited for beside";
    }
    if (gpu_client_designation(pod) == ClientDesignation::kClient && !is_dra_plugin_client(pod))
      return "an annotated GPU client, reset beside";
    return std::nullopt;
  };
  std::vector<std::string> uids;
  auto s = evict_gpu_workloads(ctx, taken, &uids);
  workload_uids_.insert(uids.begin(), uids.end());
  if (s) return s;
  if (stop.cancelled() && !cancel_.cancelled()) return s;
  spdlog::info("Failed to drain node of GPU pods");
  spdlog::error("{}", s.error().message);
  if (cancel_.cancelled()) return s;
  if (!auto_drain_enabled_)
    return s.error().wrap("cannot proceed until all GPU pods are drained from the node");
  drain_pending_ = true;  // once the steps beside are done
  return ok_status();
}

// The full-drain fallback after a failed GPU-workload eviction; the node is cordoned already.
Status Uninstall::drain_after_failed_eviction() {
  spdlog::info("Attempting node drain");
  return drain_node(ctx_);
}

// The DRA kubelet plugin goes last (docs/behaviour.md, DRA claims).
Status Uninstall::drain_dra_plugin() {
  spdlog::info("Draining the DRA kubelet-plugin (last, after its claim-holding clients)");
  const auto body = plugin_patch(snapshot_, table_);
  if (patch_has_labels(body)) {
    register_label_restore();
    if (auto s = pause_labels(body["metadata"]["labels"]); !s) return s.error();
  }
  return wait_for_operands(pods_, plugin_waits(snapshot_, table_), settings_.operator_namespace,
                           operand_deadline(), cancel_);
}

Status Uninstall::cleanup_driver() {
  spdlog::info("Cleaning up NVIDIA driver");
  // The host logs "Could not unload NVIDIA driver kernel modules, driver is in use" and the module table.
  if (auto u = host_.unload_nvidia_modules(); !u) {
    return name_driver_holders(u.error(), host_.nvidia_holder_processes(), pods_.pods())
        .wrap("failed to unload NVIDIA driver kernel modules");
  }
  return remove_stale_driver_root();
}

// With the full-drain fallback (`kubectl drain` semantics: cordon first; docs/behaviour.md, Full-drain
// fallback).
Status Uninstall::uninstall_driver_components() {
  if (!host_.module_loaded("nvidia")) return remove_stale_driver_root();
  auto s = cleanup_driver();
  if (!s && auto_drain_enabled_ && !cancel_.cancelled()) {
    spdlog::info("Unable to cleanup driver modules, attempting again with node drain...");
    if (auto c = cordon(); !c) return c;
    if (auto d = drain_node(ctx_); !d) return d;
    DM_STEP(check_cancelled());
    s = cleanup_driver();
  }
  if (!s) {
    spdlog::error("Failed to uninstall nvidia driver components");
    return s;
  }
  spdlog::info("Successfully uninstalled nvidia driver components");
  return ok_status();
}

// The old driver root goes with its PID file, after the unload or when no driver is loaded.
Status Uninstall::remove_stale_driver_root() {
  spdlog::info("Unmounting NVIDIA driver rootfs");
  if (auto m = host_.unmount_driver_root(); !m)
    return m.error().wrap("failed to unmount the NVIDIA driver rootfs");
  host_.remove_pid_file();
  return ok_status();
}

// vfio-manage's output is re-logged, not discarded: a failure must be explainable from the log.
Status Uninstall::unbind_vfio() {
  spdlog::info("Unbinding vfio-pci driver from all devices");
  const auto r = host_.run({settings_.vfio_manage, "unbind", "--all"});
  std::istringstream out(r.output);
  for (std::string line; std::getline(out, line);) {
    if (!line.empty()) spdlog::info("vfio-manage: {}", line);
  }
  if (r.exit_code == 0) return ok_status();
  spdlog::error("Unable to unbind vfio-pci driver from all devices");
  if (r.exit_code < 0) return Error("could not run " + settings_.vfio_manage + " (set VFIO_MANAGE_PATH)");
  return Error(fmt::format("{} unbind --all failed with exit code {}", settings_.vfio_manage, r.exit_code));
}

// See docs/behaviour.md, MOFED wait.
Status Uninstall::wait_for_mofed() {
  if (!settings_.gpu_direct_rdma_enabled) return ok_status();
  const auto bdf = host_.first_mellanox_device();
  if (!bdf) {
    spdlog::info("No Mellanox devices were found");
    return ok_status();
  }
  spdlog::info("Mellanox device found at {}", *bdf);
  spdlog::info("GPUDirectRDMA is enabled, validating MOFED driver installation");
  const auto deadline = settings_.mofed_wait_timeout == Duration::zero()
                            ? Deadline::none()
                            : Deadline::after(clock_, settings_.mofed_wait_timeout);
  return host::wait_for_mofed(host_, settings_.use_host_mofed, clock_, deadline, cancel_);
}

// Pauses `labels` and records, in the same patch, what they were before (see paused_record.h).
Status Uninstall::pause_labels(const nlohmann::json& labels) {
  paused_record_ = merge_paused_record(paused_record_, labels, snapshot_.labels);
  nlohmann::json annotations = {{std::string(kPausedLabelsAnnotation), paused_record_value(paused_record_)}};
  {
    std::lock_guard lk(state_mu_);  // the phase's state rides along (manager/progress)
    if (state_pending_) annotations[std::string(kStateAnnotation)] = progress_.annotation_value();
  }
  auto s = node_.update_labels(labels, annotations);
  if (!s) return s;
  progress_.add_paused_labels(labels.size());
  std::lock_guard lk(state_mu_);
  state_pending_ = false;
  return s;
}

// Puts back the operand labels that are still at the value this run paused them to (or that a crashed run
// left paused); a label the operator or an admin changed in the meantime is theirs and left alone.
Status Uninstall::restore_labels() {
  spdlog::info(
      "Rescheduling all GPU clients on the current node by enabling their component-specific nodeSelector "
      "labels");
  if (!patch_has_labels(restore_patch(snapshot_, table_)) && paused_record_.empty()) return ok_status();
  auto node = undo_node().get();
  if (!node) return node.error();
  const auto plan = restore_patch_if_unchanged(snapshot_, table_, *node);
  for (const auto& [key, value] : plan.changed_by_others) {
    spdlog::warn("Not restoring node label \"{}\": it was changed to \"{}\" during the run by someone else",
                 key, value);
  }
  // The record goes with the restore: once the labels are back (or someone else's), nothing is paused.
  nlohmann::json annotations = nlohmann::json::object();
  if (has_paused_record(*node)) annotations[std::string(kPausedLabelsAnnotation)] = nullptr;
  const nlohmann::json labels =
      patch_has_labels(plan.patch) ? plan.patch["metadata"]["labels"] : nlohmann::json::object();
  if (auto s = undo_node().update_labels(labels, annotations); !s) return s;
  paused_record_.clear();
  return ok_status();
}

// See docs/behaviour.md, Kernel modules and the driver root.
Status Uninstall::unload_nouveau() {
  if (!host_.module_loaded("nouveau")) return ok_status();
  // The host logs "Unloading nouveau driver" / "Successfully unloaded nouveau driver".
  if (auto s = host_.unload_module("nouveau"); !s)
    return s.error().wrap("failed to unload the nouveau driver");
  return ok_status();
}

#undef DM_STEP

}  // namespace

int run_uninstall_driver(const Settings& in_settings) {
  install_sigterm_handler();
  CancelToken cancel(&g_terminated);
  Settings settings = in_settings;
  // vfio-manage (a child process) finds the simulated host through the environment.
  if (!settings.sim_root.empty()) setenv("DRIVER_MANAGER_SIM_ROOT", settings.sim_root.c_str(), 1);
  fill_pod_identity_from_env(settings);
  if (settings.node_name.empty()) {
    spdlog::critical("NODE_NAME (--node-name) is empty: set it to the name of this Kubernetes node");
    return kExitFailed;
  }
  const char* path_env = std::getenv("PATH");
  if (auto problems = settings_problems(settings, path_env != nullptr ? path_env : ""); !problems.empty()) {
    for (const auto& p : problems) spdlog::critical("{}", p);
    return kExitFailed;
  }
  SystemClock clock;
  auto config = kube::load_config(settings.kubeconfig);
  if (!config) {
    spdlog::critical("cannot load the Kubernetes client configuration: {}", config.error().message);
    return kExitFailed;
  }
  kube::ClientOptions options;
  options.clock = &clock;
  // Every request rides out a control-plane restart: 9 retries back off for about 20-40 s in total.
  options.max_retries = 9;
  // SIGTERM stops the request in flight (and its retries) at once, so the cleanup starts within the grace
  // period even while the API server is away; the cleanup then writes with a token of its own.
  options.cancel = cancel;
  auto client = kube::Client::create(*config, options);
  if (!client) {
    spdlog::critical("cannot create the Kubernetes client for {}: {}", config->source,
                     client.error().message);
    return kExitFailed;
  }
  auto host = host::make_host(settings.sim_root);
  Uninstall flow(settings, **client, *host, clock, cancel);
  const int exit_code = flow.run(*config);
  flow.finish(exit_code);
  return exit_code;
}

}  // namespace dm::manager
