#include "simulator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <set>
#include <utility>

#include "kube/objects.h"
#include "manager/rules/claims.h"
#include "pod_rules.h"

namespace nodesim {
namespace {

using Json = nlohmann::json;
using dm::kube::PatchType;
namespace paths = dm::kube::paths;

constexpr const char* kLeaseNamespace = "kube-node-lease";
constexpr auto kRetryAfterFailure = std::chrono::seconds(1);
constexpr auto kHeartbeatRetry = std::chrono::seconds(2);
constexpr auto kWatchRetry = std::chrono::seconds(2);
constexpr auto kRegisterRetry = std::chrono::seconds(2);

std::string lease_collection() {
  return std::string("/apis/coordination.k8s.io/v1/namespaces/") + kLeaseNamespace + "/leases";
}
std::string lease_path(const std::string& node) {
  return lease_collection() + "/" + node;
}

std::string uid_of(const Json& obj) {
  return obj.value("metadata", Json::object()).value("uid", "");
}

Json node_conditions(const std::string& now, const std::string& since) {
  auto cond = [&](const char* type, const char* status, const char* reason, const char* message) {
    return Json{{"type", type},       {"status", status},         {"reason", reason},
                {"message", message}, {"lastHeartbeatTime", now}, {"lastTransitionTime", since}};
  };
  return Json::array({cond("Ready", "True", "KubeletReady", "node-sim is posting ready status"),
                      cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "node-sim: no pressure"),
                      cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "node-sim: no pressure"),
                      cond("PIDPressure", "False", "KubeletHasSufficientPID", "node-sim: no pressure")});
}

std::string format_utc(std::chrono::system_clock::time_point tp, bool micro) {
  const std::time_t t = std::chrono::system_clock::to_time_t(tp);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!micro) return std::string(buf) + "Z";
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count() % 1000000;
  return fmt::format("{}.{:06d}Z", buf, us);
}

}  // namespace

std::string rfc3339_now() {
  return format_utc(std::chrono::system_clock::now(), false);
}
std::string micro_time_now() {
  return format_utc(std::chrono::system_clock::now(), true);
}

Simulator::Simulator(SimOptions options, std::unique_ptr<dm::kube::Api> watch_client,
                     std::unique_ptr<dm::kube::Api> client, const dm::Clock& clock, dm::CancelToken cancel)
    : opt_(std::move(options)),
      watch_client_(std::move(watch_client)),
      client_(std::move(client)),
      clock_(clock),
      cancel_(std::move(cancel)),
      kernel_(opt_.sim_root) {}

dm::Status Simulator::register_node() {
  const std::string& name = opt_.node;
  const Json labels = {
      {"kubernetes.io/hostname", name}, {"kubernetes.io/os", "linux"}, {"kubernetes.io/arch", "amd64"}};
  auto existing = client_->get(paths::node(name));
  if (existing) {
    // Reuse the node (e.g. node-sim restarted): keep its labels and taints, add ours.
    auto patched = client_->patch(paths::node(name), PatchType::kMerge, {{"metadata", {{"labels", labels}}}});
    if (!patched) return patched.error().wrap("labelling existing node " + name);
    node_uid_ = uid_of(*patched);
    spdlog::info("node {}: reusing the existing Node", name);
  } else if (existing.error().not_found()) {
    const Json node = {
        {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
    auto created = client_->create(paths::nodes(), node);
    if (!created) return created.error().wrap("creating node " + name);
    node_uid_ = uid_of(*created);
    spdlog::info("node {}: created", name);
  } else {
    return existing.error().wrap("reading node " + name);
  }

  registered_at_ = rfc3339_now();
  const Json resources = {{"cpu", "32"},
                          {"memory", "256Gi"},
                          {"pods", "110"},
                          {"ephemeral-storage", "500Gi"},
                          {"nvidia.com/gpu", std::to_string(opt_.gpus)}};
  const Json status = {{"status",
                        {{"conditions", node_conditions(registered_at_, registered_at_)},
                         {"capacity", resources},
                         {"allocatable", resources},
                         {"addresses", Json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
                                                    {{"type", "Hostname"}, {"address", name}}})},
                         {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
                         {"nodeInfo",
                          {{"machineID", "node-sim-" + name},
                           {"systemUUID", "node-sim-" + name},
                           {"bootID", "node-sim"},
                           {"kernelVersion", "node-sim"},
                           {"osImage", "node-sim"},
                           {"containerRuntimeVersion", "node-sim://1"},
                           {"kubeletVersion", "v1.37.2-node-sim"},
                           {"kubeProxyVersion", "v1.37.2-node-sim"},
                           {"operatingSystem", "linux"},
                           {"architecture", "amd64"}}}}}};
  auto st = client_->patch(paths::node(name) + "/status", PatchType::kStrategicMerge, status);
  if (!st) return st.error().wrap("setting the status of node " + name);
  if (auto lease = renew_lease(micro_time_now()); !lease) {
    spdlog::warn("node {}: lease not renewed: {} (retrying at the next heartbeat)", name,
                 lease.error().message);
  }
  spdlog::info("node {}: registered and Ready (cpu 32, memory 256Gi, pods 110, nvidia.com/gpu {})", name,
               opt_.gpus);
  next_heartbeat_ = clock_.now() + opt_.heartbeat;
  return dm::ok_status();
}

dm::Status Simulator::publish_capacity() {
  auto node = client_->get(paths::node(opt_.node));
  if (!node) return node.error().wrap("reading node " + opt_.node);
  // No GPUs of node-sim's: a device plugin on the node has the kubelet publish them.
  if (opt_.gpus == 0) return dm::ok_status();
  const std::string want = std::to_string(opt_.gpus);
  const Json& status = node->value("status", Json::object());
  const auto has = [&](const char* list) {
    const Json& m = status.value(list, Json::object());
    return m.contains("nvidia.com/gpu") && m["nvidia.com/gpu"] == want;
  };
  if (has("capacity") && has("allocatable")) return dm::ok_status();
  // As a device plugin would: the kubelet keeps an extended resource in capacity and derives allocatable.
  const Json patch = {
      {"status", {{"capacity", {{"nvidia.com/gpu", want}}}, {"allocatable", {{"nvidia.com/gpu", want}}}}}};
  auto st = client_->patch(paths::node(opt_.node) + "/status", PatchType::kStrategicMerge, patch);
  if (!st) return st.error().wrap("setting the nvidia.com/gpu capacity of node " + opt_.node);
  spdlog::info("node {}: nvidia.com/gpu capacity {}", opt_.node, want);
  return dm::ok_status();
}

void Simulator::load_driver_for(TrackedPod& t) {
  // The driver container "installs" the driver: the modules appear (unless still loaded) and the state
  // file records the configuration it was installed with.
  if (!kernel_.driver_loaded()) {
    if (auto st = kernel_.load_driver(); !st) {
      spdlog::error("kernel: cannot load the driver for pod {}: {} (retrying)", pod_key(t.pod),
                    st.error().message);
      t.next_attempt = clock_.now() + kRetryAfterFailure;
      return;
    }
  }
  if (const auto digest = driver_config_digest(t.pod)) {
    if (auto st = kernel_.write_driver_state(*digest); !st) {
      spdlog::error("kernel: {} (retrying)", st.error().message);
      t.next_attempt = clock_.now() + kRetryAfterFailure;
      return;
    }
  }
  t.loaded_driver = true;
  spdlog::info("pod {}: driver loaded", pod_key(t.pod));
  next_kernel_attempt_ = {};
}

dm::Status Simulator::renew_lease(const std::string& now) {
  const Json spec = {{"holderIdentity", opt_.node}, {"leaseDurationSeconds", 40}, {"renewTime", now}};
  auto patched = client_->patch(lease_path(opt_.node), PatchType::kMerge, {{"spec", spec}});
  if (patched) return dm::ok_status();
  if (!patched.error().not_found())
    return patched.error().wrap("renewing lease " + std::string(kLeaseNamespace) + "/" + opt_.node);
  Json meta = {{"name", opt_.node}, {"namespace", kLeaseNamespace}};
  if (!node_uid_.empty()) {
    // Like a kubelet's lease: garbage-collected with its Node.
    meta["ownerReferences"] =
        Json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", opt_.node}, {"uid", node_uid_}}});
  }
  auto created = client_->create(
      lease_collection(),
      {{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"}, {"metadata", meta}, {"spec", spec}});
  if (created || created.error().conflict()) return dm::ok_status();
  return created.error().wrap("creating lease " + std::string(kLeaseNamespace) + "/" + opt_.node);
}

dm::Status Simulator::heartbeat() {
  const Json status = {{"status", {{"conditions", node_conditions(rfc3339_now(), registered_at_)}}}};
  auto st = client_->patch(paths::node(opt_.node) + "/status", PatchType::kStrategicMerge, status);
  if (!st) {
    if (st.error().not_found()) {
      spdlog::warn("node {}: the Node was deleted; registering it again", opt_.node);
      return register_node();
    }
    return st.error().wrap("heartbeat of node " + opt_.node);
  }
  return renew_lease(micro_time_now());
}

void Simulator::upsert(const Json& pod, dm::TimePoint seen) {
  const std::string uid = uid_of(pod);
  if (uid.empty()) return;
  auto [it, inserted] = pods_.try_emplace(uid);
  TrackedPod& t = it->second;
  t.pod = pod;
  if (inserted) spdlog::debug("pod {}: seen on node {}", pod_key(pod), opt_.node);
  if (dm::kube::terminating(pod) && !t.terminating_since) {
    t.terminating_since = seen;
    std::string warning;
    const auto delay = termination_delay_seconds(pod, &warning);
    if (!warning.empty()) spdlog::warn("{}", warning);
    if (delay) {
      spdlog::info("pod {}: terminating, finishing in {} s", pod_key(pod), *delay);
    } else {
      spdlog::info("pod {}: terminating, but annotated {}: it will never finish", pod_key(pod),
                   kStuckAnnotation);
      t.stuck_logged = true;
    }
  }
}

void Simulator::on_sync(const std::vector<Json>& items) {
  changed_ = true;
  const auto seen = clock_.now();
  std::set<std::string> present;
  for (const auto& pod : items) {
    present.insert(uid_of(pod));
    upsert(pod, seen);
  }
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (present.count(it->first) == 0) {
      spdlog::info("pod {}: gone", pod_key(it->second.pod));
      it = pods_.erase(it);
    } else {
      ++it;
    }
  }
  spdlog::info("node {}: {} pod(s) bound", opt_.node, pods_.size());
}

void Simulator::on_event(const dm::kube::WatchEvent& event) {
  changed_ = true;
  if (event.type == "DELETED") {
    auto it = pods_.find(uid_of(event.object));
    if (it != pods_.end()) {
      spdlog::info("pod {}: gone", pod_key(it->second.pod));
      pods_.erase(it);
    }
  } else if (event.type == "ADDED" || event.type == "MODIFIED") {
    upsert(event.object, clock_.now());
  }
}

void Simulator::start_pod(TrackedPod& t) {
  const Json& meta = t.pod["metadata"];
  const std::string ns = meta.value("namespace", "");
  const std::string name = meta.value("name", "");
  const unsigned n = ip_counter_++;
  const std::string pod_ip = fmt::format("10.88.{}.{}", (n / 250) % 256, n % 250 + 1);
  auto patched = client_->patch(paths::pod(ns, name) + "/status", PatchType::kStrategicMerge,
                                running_status_patch(t.pod, rfc3339_now(), "127.0.0.1", pod_ip));
  if (patched) {
    t.started = true;
    spdlog::info("pod {}: started (Running, Ready, podIP {}{})", pod_key(t.pod), pod_ip,
                 holds_gpu_now(t) ? ", holds the GPU" : "");
    return;
  }
  if (patched.error().not_found()) return;  // deleted meanwhile; the watch will say so
  spdlog::warn("pod {}: cannot mark it Running: {} (retrying)", pod_key(t.pod), patched.error().message);
  t.next_attempt = clock_.now() + kRetryAfterFailure;
}

bool Simulator::holds_gpu_now(TrackedPod& t) {
  return holds_gpu(t.pod, gpu_claim(t));
}

bool Simulator::gpu_claim(TrackedPod& t) {
  if (t.gpu_claim) return *t.gpu_claim;
  const auto names = dm::manager::claim_names(t.pod);
  const Json& spec = t.pod.value("spec", Json::object());
  const size_t entries = spec.value("resourceClaims", Json::array()).size();
  const std::string ns = t.pod["metadata"].value("namespace", "");
  for (const auto& name : names) {
    auto claim = client_->get(dm::kube::paths::resource_claim(ns, name));
    if (!claim) {
      if (claim.error().not_found()) continue;
      spdlog::warn("pod {}: cannot read resource claim {}: {} (asking again later)", pod_key(t.pod), name,
                   claim.error().message);
      return false;
    }
    if (dm::manager::is_allocated_gpu_claim(*claim)) {
      t.gpu_claim = true;
      return true;
    }
  }
  // A claim generated from a template is named in the pod's status once it exists: until then, ask again.
  if (names.size() == entries) t.gpu_claim = false;
  return false;
}

void Simulator::collect_finished() {
  if (!finisher_ || !finisher_->has_outcomes()) return;
  for (const auto& o : finisher_->take_outcomes()) {
    auto it = pods_.find(o.uid);
    if (it == pods_.end()) continue;  // its DELETED event came first
    TrackedPod& t = it->second;
    t.deleting = false;
    if (o.finished) {
      t.finished = true;
    } else {
      t.next_attempt = clock_.now() + kRetryAfterFailure;
    }
  }
}

void Simulator::update_kernel() {
  if (clock_.now() < next_kernel_attempt_) return;
  std::vector<SimHolder> holders;
  for (auto& [uid, t] : pods_) {
    if (!holds_gpu_now(t)) continue;
    if (opt_.kernel_only) {
      // The kubelet reports the containers: a pod holds the device while one of them runs.
      if (has_running_container(t.pod)) holders.push_back({pod_key(t.pod), uid});
      continue;
    }
    // A terminating pod still holds the device until node-sim has finished it (its process exited).
    if (!t.finished && !t.exited && (t.started || is_running(t.pod)))
      holders.push_back({pod_key(t.pod), uid});
  }
  if (auto st = kernel_.set_holders(std::move(holders)); !st) {
    spdlog::error("kernel: cannot update the nvidia refcount: {} (retrying)", st.error().message);
    next_kernel_attempt_ = clock_.now() + kRetryAfterFailure;
  }
}

void Simulator::on_tick() {
  const bool due = clock_.now() >= next_wake_;
  if (changed_ || due || (finisher_ && finisher_->has_outcomes())) reconcile();
}

void Simulator::reconcile() {
  changed_ = false;
  auto now = clock_.now();
  next_wake_ = now + opt_.recheck;
  const auto wake_at = [&](dm::TimePoint at) { next_wake_ = std::min(next_wake_, at); };
  if (opt_.kernel_only) {
    if (now >= next_heartbeat_) {
      if (auto st = publish_capacity(); !st) spdlog::warn("{} (retrying)", st.error().message);
      next_heartbeat_ = now + opt_.heartbeat;
    }
    for (auto& [uid, t] : pods_) {
      if (!t.loaded_driver && now >= t.next_attempt && loads_driver(t.pod) && !dm::kube::terminating(t.pod) &&
          all_containers_running(t.pod)) {
        load_driver_for(t);
      }
    }
    update_kernel();
    return;
  }
  collect_finished();
  if (now >= next_heartbeat_) {
    if (auto st = heartbeat(); !st) {
      spdlog::warn("node {}: {} (retrying)", opt_.node, st.error().message);
      next_heartbeat_ = now + kHeartbeatRetry;
    } else {
      next_heartbeat_ = now + opt_.heartbeat;
    }
  }
  wake_at(next_heartbeat_);
  std::vector<Finisher::Job> due;
  bool exited = false;
  // One `now` for the whole pass (after the heartbeat's requests): pods due together are ended together.
  now = clock_.now();
  for (auto& [uid, t] : pods_) {
    if (cancel_.cancelled()) return;
    if (t.finished || t.deleting) continue;
    if (now < t.next_attempt) {
      wake_at(t.next_attempt);
      continue;
    }
    if (dm::kube::terminating(t.pod)) {
      // Re-read each time: an annotation may change while the pod is terminating (e.g. a test unsticks it).
      const auto delay = termination_delay_seconds(t.pod);
      if (!delay) {
        if (!t.stuck_logged) spdlog::info("pod {}: stuck terminating ({})", pod_key(t.pod), kStuckAnnotation);
        t.stuck_logged = true;
        continue;
      }
      const auto due_at =
          *t.terminating_since + std::chrono::ceil<dm::Duration>(std::chrono::duration<double>(*delay));
      if (now < due_at) {
        wake_at(due_at);
        continue;
      }
      // Its processes exit now; the finisher deletes its object once the refcount below has dropped.
      exited = exited || !t.exited;
      t.exited = true;
      t.deleting = true;
      const Json& meta = t.pod["metadata"];
      due.push_back({uid, meta.value("namespace", ""), meta.value("name", ""), *t.terminating_since});
    } else if (!t.started && needs_start(t.pod)) {
      start_pod(t);
      if (!t.started && t.next_attempt > now) wake_at(t.next_attempt);
    }
  }
  // Like a kubelet, a pod's processes exit (releasing the device) before its object is removed: whoever
  // sees the pod gone must find the refcount already dropped.
  if (exited) next_kernel_attempt_ = {};
  update_kernel();
  if (next_kernel_attempt_ > now) wake_at(next_kernel_attempt_);
  for (auto& job : due) finisher_->submit(std::move(job));
}

dm::Status Simulator::run() {
  while (true) {
    auto st = opt_.kernel_only ? publish_capacity() : register_node();
    if (st) break;
    if (st.error().forbidden() || st.error().http_status == 401) {
      return st.error().wrap("node-sim's credentials may not manage nodes; use an admin kubeconfig");
    }
    // Kernel-only: the kubelet has not registered the Node yet.
    if (opt_.kernel_only && st.error().not_found()) {
      spdlog::info("node {}: waiting for the kubelet to register the Node", opt_.node);
    } else {
      spdlog::warn("{} (retrying in 2 s)", st.error().message);
    }
    if (!clock_.sleep_for(kRegisterRetry, cancel_)) return dm::ok_status();
  }
  if (opt_.driver) {
    if (auto st = kernel_.load_driver(); !st) return st;
  } else {
    spdlog::info("kernel: --no-driver, no NVIDIA modules under {}", opt_.sim_root);
  }
  if (!opt_.kernel_only) finisher_ = std::make_unique<Finisher>(*client_, clock_, opt_.finish_workers);

  dm::kube::ListOptions list;
  list.field_selector = "spec.nodeName=" + opt_.node;
  dm::kube::WatchHandlers handlers;
  handlers.on_sync = [this](const std::vector<Json>& items) { on_sync(items); };
  handlers.on_event = [this](const dm::kube::WatchEvent& e) { on_event(e); };
  handlers.done = [this] {
    if (!cancel_.cancelled()) on_tick();
    return cancel_.cancelled();
  };
  handlers.tick = opt_.tick;
  while (!cancel_.cancelled()) {
    auto st = watch_client_->list_watch(paths::pods(), list, handlers);
    if (cancel_.cancelled()) break;
    if (st) continue;  // done() only returns true when cancelled; be safe and watch again
    spdlog::warn("watch of pods on node {} failed: {} (retrying in 2 s)", opt_.node, st.error().message);
    if (!clock_.sleep_for(kWatchRetry, cancel_)) break;
    reconcile();
  }
  finisher_.reset();  // joins its workers; a DELETE in flight ends with the cancel token
  spdlog::info("node-sim for node {}: stopping", opt_.node);
  return dm::ok_status();
}

}  // namespace nodesim
