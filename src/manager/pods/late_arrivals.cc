#include "manager/pods/late_arrivals.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/pods/pod_watch.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

constexpr size_t kMaxNamed = 10;

// "pid 17 (nvidia-smi), pid 18 (dcgmi)".
std::string join_labels(const std::vector<std::string>& labels) {
  return fmt::format("{}", fmt::join(labels, ", "));
}

// The holders by pod UID ("" = outside any pod), without `skip_uids`.
std::map<std::string, std::vector<std::string>> holders_by_pod(
    const std::vector<host::HolderProcess>& holders, const std::set<std::string>& skip_uids) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& h : holders) {
    if (!h.pod_uid.empty() && skip_uids.contains(h.pod_uid)) continue;
    out[h.pod_uid].push_back(h.label());
  }
  return out;
}

Error held_outside_pods(const std::string& node, const std::vector<std::string>& labels) {
  return Error(fmt::format(
      "the NVIDIA driver is held on node {} outside any pod by {}: no eviction can end it. Stop it on the "
      "host (a service such as nvidia-persistenced or a monitoring agent, or a process started by hand), "
      "then run driver-manager again; nothing was unloaded",
      node, join_labels(labels)));
}

// Looks at the holders (`look`) until none runs outside a pod (`skip_uids` passed over), logging each look
// that finds one and pausing as the late-arrival looks do, the last look at kHostHolderPatience after the
// first. Returns the last look's holders, or the error naming the processes still outside a pod.
Result<std::vector<host::HolderProcess>> wait_for_host_processes(
    const DrainContext& ctx, const std::function<std::vector<host::HolderProcess>()>& look,
    const std::set<std::string>& skip_uids) {
  const TimePoint first = ctx.clock.now();
  Duration pause = kLateArrivalFirstPause;
  for (int round = 1;; ++round) {
    auto holders = look();
    const auto by_pod = holders_by_pod(holders, skip_uids);
    const auto outside = by_pod.find("");
    if (outside == by_pod.end()) return holders;
    const Duration waited = ctx.clock.now() - first;
    if (waited >= kHostHolderPatience) return held_outside_pods(ctx.node.node(), outside->second);
    const Duration next = std::min(pause, kHostHolderPatience - waited);
    spdlog::info(
        "The NVIDIA driver is held on node {} outside any pod: waiting for host process{} {} to close the "
        "NVIDIA device files (look {}; looking again in {}, for at most {} after the first look)",
        ctx.node.node(), outside->second.size() == 1 ? "" : "es", join_labels(outside->second), round,
        format_duration(next, DurationStyle::kWholeSeconds),
        format_duration(kHostHolderPatience, DurationStyle::kWholeSeconds));
    if (!ctx.clock.sleep_for(next, ctx.cancel)) return Error("terminated by SIGTERM");
    pause = std::min(pause * 2, kLateArrivalLongestPause);
  }
}

// Designated GPU clients need no designation: only a refused pod that is not one gets that advice.
Error holders_refused(const std::string& node, const std::vector<std::string>& refused, bool only_clients) {
  return Error(fmt::format(
      "pods found holding the GPU on the host of node {} cannot be evicted: {}. {}stop a pod without a "
      "controller yourself (or set DRAIN_USE_FORCE=true); nothing was unloaded",
      node, fmt::format("{}", fmt::join(refused, "; ")),
      only_clients ? ""
                   : "Annotate a DaemonSet's pods nvidia.com/gpu.client=true or have them select "
                     "nvidia.com/gpu.deploy.client; "));
}

void add_names(const PodListDecision& decision, const std::string& what, std::vector<std::string>& out) {
  for (const auto* list : {&decision.to_evict, &decision.to_wait}) {
    for (const auto& p : *list) out.push_back(kube::ref_string(p) + " (" + what + ")");
  }
}

// The pause before the next look at pods arriving late, logged as `what` (node, pause), then doubled up to
// kLateArrivalLongestPause: the scheduler's caches need a moment to catch up, and a look at once would find
// the next pod it is placing.
Status pause_before_next_look(const DrainContext& ctx, Duration& pause,
                              fmt::format_string<const std::string&, std::string> what) {
  spdlog::info(what, ctx.node.node(), format_duration(pause, DurationStyle::kWholeSeconds));
  if (!ctx.clock.sleep_for(pause, ctx.cancel)) return Error("terminated by SIGTERM");
  pause = std::min(pause * 2, kLateArrivalLongestPause);
  return ok_status();
}

}  // namespace

LateArrivals::LateArrivals(const DrainContext& ctx, GpuClientReset& clients, bool workloads,
                           TakenBeside beside)
    : ctx_(ctx), clients_(clients), workloads_(workloads), beside_(std::move(beside)) {}

Result<LateLook> LateArrivals::look(const PodSnapshot& pods) const {
  LateLook found;
  const PodListDecision clients = clients_.decide_clients(pods);
  found.clients = targets_of(clients);
  add_names(clients, "GPU client", found.names);
  found.refused = clients.errors;
  if (!workloads_) return found;
  // Annotated clients are the reset's (DRA plugin clients included: their own step), operands their
  // labels'.
  PodSnapshot rest;
  for (const auto& p : pods) {
    if (gpu_client_designation(*p) == ClientDesignation::kClient) continue;
    if (beside_ && beside_(*p)) continue;
    rest.push_back(p);
  }
  auto decided = decide_gpu_workload_eviction(rest, drain_options(ctx_.settings), api_pod_facts(ctx_.client));
  if (!decided) return decided.error().wrap("failed to identify GPU pods");
  found.workloads = targets_of(decided->pods);
  add_names(decided->pods, "GPU workload", found.names);
  found.refused.insert(found.refused.end(), decided->pods.errors.begin(), decided->pods.errors.end());
  return found;
}

Status LateArrivals::evict(const LateLook& found) {
  if (on_first_eviction_) {
    on_first_eviction_();
    on_first_eviction_ = nullptr;
  }
  for (const auto& t : found.clients) client_uids_.push_back(t.uid);
  for (const auto& t : found.workloads) workload_uids_.push_back(t.uid);
  if (auto c = clients_.evict_clients(found.clients, ctx_.cancel); !c) return c;
  if (found.workloads.empty()) return ok_status();
  EvictionOptions o;
  o.what = "GPU pods that arrived late";
  o.retry_interval = ctx_.settings.eviction_retry_interval;
  auto s =
      evict_pods(ctx_.client, ctx_.pods, ctx_.clock, found.workloads, drain_deadline(ctx_), ctx_.cancel, o);
  if (!s) return s.error().wrap("failed to evict the GPU pods that arrived late on node " + ctx_.node.node());
  return ok_status();
}

Status LateArrivals::evict_until_none() {
  const std::string& node = ctx_.node.node();
  spdlog::info("Looking once more for GPU pods on node {} before the unload (a fresh list)", node);
  std::optional<TimePoint> first_found;
  Duration pause = kLateArrivalFirstPause;
  for (int round = 1;; ++round) {
    auto pods = list_pods_fresh(ctx_.client, ctx_.pods, ctx_.clock, node, "", ctx_.cancel);
    if (!pods) return pods.error();
    auto found = look(*pods);
    if (!found) return found.error();
    if (!found->refused.empty()) {
      for (const auto& e : found->refused) spdlog::error("error reported by drain helper: {}", e);
      return Error(fmt::format(
          "GPU pods arrived on node {} after it was cordoned and tainted and cannot be evicted: {}", node,
          fmt::join(found->refused, "; ")));
    }
    if (found->empty()) {
      spdlog::info("No {}GPU pods arrived late on node {}", round == 1 ? "" : "more ", node);
      return ok_status();
    }
    const std::string names = join_names(found->names, kMaxNamed);
    const TimePoint now = ctx_.clock.now();
    if (!first_found) first_found = now;
    const auto outage_ended = ctx_.client.outage_ended_at();
    const bool after_outage = late_arrivals_after_outage(now, outage_ended);
    if (late_arrivals_exhausted(now, *first_found, outage_ended)) {
      return Error(fmt::format(
          "GPU pods keep arriving on node {} after it was cordoned and tainted: evicted late arrivals {} "
          "times "
          "in {}, and still {}. Something keeps placing GPU pods on the node (a controller that sets "
          "spec.nodeName itself, or pods that tolerate the cordon and the taint): stop it, then run "
          "driver-manager again",
          node, round - 1, format_duration(now - *first_found, DurationStyle::kWholeSeconds), names));
    }
    spdlog::warn(
        "{} GPU pod(s) arrived late on node {}: {}. A pod the scheduler chose for the node before the cordon "
        "or the taint can still be bound to it afterwards (the scheduler's caches lag behind, most of all "
        "after an API server restart), and it would hold the GPU at the unload: evicting them too (round {}; "
        "pods still arriving {} fail the run)",
        found->names.size(), node, names, round,
        after_outage ? format_duration(kLateArrivalPatienceAfterOutage, DurationStyle::kWholeSeconds) +
                           " after the API server came back"
                     : format_duration(kLateArrivalPatience, DurationStyle::kWholeSeconds) +
                           " after the first late one");
    if (auto s = evict(*found); !s) return s;
    if (auto s = pause_before_next_look(ctx_, pause, "Looking again for GPU pods on node {} in {}"); !s)
      return s;
  }
}

Result<bool> LateArrivals::evict_holders(const std::set<std::string>& holder_uids) {
  if (holder_uids.empty() || holder_uids.contains("")) return false;  // a host process is no pod to evict
  auto pods = list_pods_fresh(ctx_.client, ctx_.pods, ctx_.clock, ctx_.node.node(), "", ctx_.cancel);
  if (!pods) return pods.error();
  PodSnapshot holders;
  for (const auto& p : *pods) {
    if (holder_uids.contains(kube::uid(*p))) holders.push_back(p);
  }
  if (holders.size() != holder_uids.size()) return false;  // some holder is not a pod of this node
  auto found = look(holders);
  if (!found) return found.error();
  if (!found->refused.empty() || found->clients.size() + found->workloads.size() != holders.size())
    return false;
  spdlog::warn(
      "The NVIDIA driver is held by pods that arrived on node {} after the last look: {}; evicting them and "
      "trying the unload again",
      ctx_.node.node(), join_names(found->names, kMaxNamed));
  if (auto s = evict(*found); !s) return s.error();
  return true;
}

Status LateArrivals::evict_holders_until_unloaded(
    const std::function<std::vector<host::HolderProcess>()>& holders, const std::function<Status()>& unload,
    Status& unloaded) {
  const std::string& node = ctx_.node.node();
  const TimePoint first_refused = ctx_.clock.now();
  Duration pause = kLateArrivalFirstPause;
  for (int round = 1; !unloaded; ++round) {
    if (round > 1) {
      const TimePoint now = ctx_.clock.now();
      if (late_arrivals_exhausted(now, first_refused, ctx_.client.outage_ended_at())) {
        unloaded = Error(fmt::format(
            "{}; GPU pods kept arriving on node {} to hold the driver: evicted them {} times in {} and it is "
            "still held. Something keeps placing GPU pods on the node (a controller that sets spec.nodeName "
            "itself, or pods that tolerate the cordon and the taint): stop it, then run driver-manager again",
            unloaded.error().message, node, round - 1,
            format_duration(now - first_refused, DurationStyle::kWholeSeconds)));
        return ok_status();
      }
      auto s = pause_before_next_look(
          ctx_, pause, "The NVIDIA driver is held again on node {}: looking at its holders in {}");
      if (!s) return s;
    }
    std::set<std::string> uids;
    for (const auto& h : holders()) uids.insert(h.pod_uid);
    auto evicted = evict_holders(uids);
    if (!evicted) return evicted.error();
    if (!*evicted) return ok_status();  // the refusal stands
    if (ctx_.cancel.cancelled()) return Error("terminated by SIGTERM");
    unloaded = unload();
  }
  return ok_status();
}

Result<size_t> LateArrivals::evict_host_holders(
    const std::function<std::vector<host::HolderProcess>()>& holders,
    const std::set<std::string>& skip_uids) {
  const std::string& node = ctx_.node.node();
  auto last_look = wait_for_host_processes(ctx_, holders, skip_uids);
  if (!last_look) return last_look.error();
  auto by_pod = holders_by_pod(*last_look, skip_uids);
  if (by_pod.empty()) return size_t{0};
  auto pods = list_pods_fresh(ctx_.client, ctx_.pods, ctx_.clock, node, "", ctx_.cancel);
  if (!pods) return pods.error();
  // Decided as GPU workloads: what the host saw is the GPU use, whatever the spec says.
  PodFacts facts = api_pod_facts(ctx_.client);
  facts.holds_gpu_claim = [](const Json&) -> Result<bool> { return true; };
  const PodPipeline pipeline = gpu_workload_pipeline(drain_options(ctx_.settings), facts);
  LateLook found;
  size_t clients_refused = 0;
  // A designated GPU client (a DaemonSet's pod the controller put back early) is reset as a client.
  PodSnapshot client_pods;
  for (const auto& p : *pods) {
    const auto it = by_pod.find(kube::uid(*p));
    if (it == by_pod.end() || gpu_client_designation(*p) != ClientDesignation::kClient) continue;
    spdlog::warn("{} ({}): found holding the GPU on the host: resetting it as a GPU client",
                 kube::ref_string(*p), join_labels(it->second));
    client_pods.push_back(p);
    by_pod.erase(it);
  }
  if (!client_pods.empty()) {
    const PodListDecision clients = clients_.decide_clients(client_pods);
    found.clients = targets_of(clients);
    add_names(clients, "GPU client found holding the GPU on the host", found.names);
    found.refused = clients.errors;
    clients_refused = clients.errors.size();
  }
  if (!workloads_) by_pod.clear();  // without GPU workload eviction, the unload names the rest
  for (const auto& p : *pods) {
    const auto it = by_pod.find(kube::uid(*p));
    if (it == by_pod.end()) continue;
    const PodDecision d = pipeline.decide(*p);
    const std::string who = d.pod + " (" + join_labels(it->second) + ")";
    if (d.verdict == Verdict::kDelete) {
      spdlog::warn(
          "{}: found holding the GPU on the host, and no rule took it off: evicting it as a GPU workload",
          who);
      found.workloads.push_back(eviction_target(*p));
      found.names.push_back(d.pod + " (found holding the GPU on the host)");
    } else {
      found.refused.push_back(who + ": " + (d.reason.empty() ? std::string(to_string(d.verdict)) : d.reason));
    }
    by_pod.erase(it);
  }
  for (const auto& [uid, labels] : by_pod) {
    found.refused.push_back(join_labels(labels) + " in pod with UID " + uid +
                            ", which is no pod of the node");
  }
  if (!found.refused.empty()) {
    return holders_refused(node, found.refused, found.refused.size() == clients_refused);
  }
  if (auto s = evict(found); !s) return s.error();
  return found.workloads.size() + found.clients.size();
}

}  // namespace dm::manager
