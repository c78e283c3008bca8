#include "manager/pods/gpu_clients.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <set>
#include <utility>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/pods/eviction.h"

namespace dm::manager {

using Json = nlohmann::json;
using kube::Taint;

namespace {

std::string phase_name(GpuClientPhase phase) {
  return phase == GpuClientPhase::kDraPlugin ? "GPU client DRA plugin pods" : "GPU client pods";
}

// Decisions about pods that are no GPU client at all are only interesting when debugging.
void log_decision(const PodDecision& d) {
  if (d.notice == Notice::kQuiet) {
    spdlog::debug("gpu-client: {}", d.log_line());
  } else if (d.verdict == Verdict::kError || !d.warnings.empty() || d.notice == Notice::kWarning) {
    spdlog::warn("gpu-client: {}", d.log_line());
  } else {
    spdlog::info("gpu-client: {}", d.log_line());
  }
}

std::string controller_desc(const Json& pod) {
  const auto ref = kube::controller_ref(pod);
  return ref ? ref->kind + "/" + ref->name : std::string("no controller");
}

Error refusal(const std::string& what, const std::vector<std::string>& errors) {
  return Error("refusing to reset " + what +
               " (nothing was evicted by this step): " + fmt::format("{}", fmt::join(errors, "; ")));
}

}  // namespace

PodPipeline gpu_client_pipeline_for(const Settings& settings, GpuClientPhase phase,
                                    const std::optional<Taint>& taint,
                                    std::shared_ptr<const LabelPause> label_pause) {
  GpuClientOptions o;
  o.phase = phase;
  o.force = settings.drain_use_force;
  o.taint = taint;
  o.label_pause = std::move(label_pause);
  return gpu_client_pipeline(o);
}

bool client_reset_needs_taint(const PodListDecision& first_look) {
  return first_look.ok() && !(first_look.to_evict.empty() && first_look.to_wait.empty());
}

bool clients_need_taint(const Settings& settings, const PodSnapshot& pods,
                        const std::shared_ptr<const LabelPause>& label_pause) {
  const auto taint = parse_taint(settings.gpu_client_taint);
  if (!taint) return false;
  for (const auto phase : {GpuClientPhase::kWithOperands, GpuClientPhase::kDraPlugin}) {
    if (client_reset_needs_taint(
            decide_pods(gpu_client_pipeline_for(settings, phase, *taint, label_pause), pods)))
      return true;
  }
  return false;
}

GpuClientReset::GpuClientReset(kube::Api& client, PodWatch& pods, const Clock& clock, CancelToken cancel,
                               const Settings& settings, UndoList& undo, TaintOps& taint,
                               std::shared_ptr<const LabelPause> label_pause)
    : client_(client, cancel),
      pods_(pods),
      clock_(clock),
      cancel_(std::move(cancel)),
      settings_(settings),
      undo_(undo),
      label_pause_(std::move(label_pause)),
      taint_ops_(taint),
      taint_(parse_taint(settings.gpu_client_taint)) {}

Status GpuClientReset::heal_leftover_taint(const Json& node) {
  const auto owned = taint_owner_annotation(node);
  if (!owned) return ok_status();
  spdlog::info("Node {} carries taint \"{}\" left by an earlier run of driver-manager ({}); removing it",
               settings_.node_name, *owned, kTaintOwnerAnnotation);
  auto r = taint_ops_.remove_ours(&node);
  if (!r) return r.error();
  owned_ = false;
  return ok_status();
}

void GpuClientReset::adopt_leftover_taint(const Json& node) {
  const auto owned = taint_owner_annotation(node);
  if (!owned) return;
  spdlog::info(
      "Node {} carries taint \"{}\" left by an earlier run of driver-manager ({}); keeping it on until the "
      "driver is unloaded",
      settings_.node_name, *owned, kTaintOwnerAnnotation);
  owned_ = true;
  register_undo();
}

void GpuClientReset::register_undo() {
  undo_.add({.key = "gpu-client-taint",
             .name = "remove the GPU client taint from node " + settings_.node_name,
             .run = [this](const NodeWriters& with) -> Status {
               if (auto r = remove_taint(with.taint); !r) {
                 return r.error().wrap("failed to remove the GPU client taint from node " +
                                       settings_.node_name);
               }
               return ok_status();
             },
             .fold =
                 [this](const Json& node, FoldedPatch& part) {
                   if (!owned_) return;
                   fold_taint_remove(node, settings_.node_name, part, [this] {
                     owned_ = false;
                     effective_taint_.reset();
                   });
                 }});
}

PodPipeline GpuClientReset::pipeline(GpuClientPhase phase, const std::optional<Taint>& taint) const {
  return gpu_client_pipeline_for(settings_, phase, taint, label_pause_);
}

Status GpuClientReset::reset_clients() {
  return reset(GpuClientPhase::kWithOperands, cancel_);
}

Status GpuClientReset::reset_clients(const CancelToken& stop) {
  return reset(GpuClientPhase::kWithOperands, stop);
}

Status GpuClientReset::reset_dra_plugin_clients() {
  return reset(GpuClientPhase::kDraPlugin, cancel_);
}

bool GpuClientReset::dra_plugin_clients_present() const {
  if (!taint_) return true;  // the reset says what is wrong with the taint
  const PodListDecision decision =
      decide_pods(pipeline(GpuClientPhase::kDraPlugin, effective_taint_.value_or(*taint_)), pods_.snapshot());
  return !decision.ok() || client_reset_needs_taint(decision);
}

bool GpuClientReset::reset_will_taint() const {
  if (!taint_ || effective_taint_) return false;
  return client_reset_needs_taint(
      decide_pods(pipeline(GpuClientPhase::kWithOperands, *taint_), pods_.snapshot()));
}

void GpuClientReset::say_tainting() const {
  spdlog::info("Tainting node {} with {} so that evicted GPU client pods are not scheduled back",
               settings_.node_name, taint_->to_string());
}

NodeFold GpuClientReset::taint_fold() {
  return [this](const Json& node, FoldedPatch& part) {
    if (!taint_ || effective_taint_) return;
    TaintAddDecision plan = decide_taint_add(node, *taint_);
    // An earlier attempt of this write that went through unanswered: the taint on the node is that one.
    const bool added_unanswered = plan.outcome == TaintOutcome::kAlreadyOurs && taint_folded_;
    if (!added_unanswered) {
      if (plan.outcome != TaintOutcome::kAdded || !plan.patch) return;  // the reset decides, on a fresh read
      owned_ = true;  // before the write, as ensure_taint() does
      taint_folded_ = true;
      register_undo();
      part.body = std::move(*plan.patch);
      part.body["metadata"].erase("resourceVersion");  // the write sets it
    }
    part.applied.emplace_back([this] {
      effective_taint_ = *taint_;
      // The write's answer is the known node now (or a newer one): a list not older than it has every pod
      // bound before the taint.
      if (known_ != nullptr) {
        if (auto seen = known_->copy()) taint_in_place_at_ = kube::resource_version(*seen);
      }
      say_tainting();
    });
  };
}

Status GpuClientReset::ensure_taint() {
  if (effective_taint_) return ok_status();  // tainted earlier in this run
  // Registered before the write: a request that timed out may still have been applied (removal reads our
  // ownership annotation, so it never touches a taint that is not ours).
  owned_ = true;
  register_undo();
  auto decision = taint_ops_.add(*taint_);
  if (!decision) return decision.error();
  owned_ = decision->outcome != TaintOutcome::kPresentNotOurs;
  effective_taint_ = decision->effective;
  taint_in_place_at_ = decision->in_place_at;
  return ok_status();
}

// Not older than the taint: the API server answers from its cache once that holds the taint, instead of
// reading every pod of the cluster from etcd, and no pod bound before the taint can be missing.
Result<PodSnapshot> GpuClientReset::relist(const CancelToken& cancel) {
  return list_pods_fresh(client_, pods_, clock_, settings_.node_name, taint_in_place_at_, cancel);
}

void GpuClientReset::warn_about_replacements(const std::vector<EvictionTarget>& targets,
                                             const PodPipeline& pipeline) const {
  std::set<std::string> original;
  for (const auto& t : targets) original.insert(t.uid);
  for (const auto& shared : pods_.snapshot()) {  // the cache's pods, not a copy of them
    const auto& pod = *shared;
    if (original.count(kube::uid(pod)) > 0 || kube::terminating(pod)) continue;
    const PodDecision d = pipeline.decide(pod);
    if (d.verdict != Verdict::kDelete) continue;
    spdlog::warn(
        "gpu-client: {} (controller {}) appeared on node {} while its GPU clients were being reset; a pod "
        "tolerating taint {} is recreated at once and, if it holds the GPU, the driver unload fails naming "
        "it. For a DaemonSet, select nvidia.com/gpu.deploy.client in its nodeSelector instead of tolerating "
        "the taint",
        kube::ref_string(pod), controller_desc(pod), settings_.node_name,
        effective_taint_ ? effective_taint_->to_string() : std::string("?"));
  }
}

Status GpuClientReset::reset(GpuClientPhase phase, const CancelToken& cancel) {
  if (!taint_) return taint_.error().wrap("GPU_CLIENT_TAINT");
  const std::string what = phase_name(phase);
  spdlog::info("Checking for {} to reset on node {} (pods annotated {}=true{})", what, settings_.node_name,
               kGpuClientAnnotation,
               phase == GpuClientPhase::kDraPlugin
                   ? " and " + std::string(kGpuClientDraPluginAnnotation) + "=true"
                   : "");

  // First look, from the watch cache: refuse before anything changes, and taint only if there is work.
  {
    const PodListDecision first =
        decide_pods(pipeline(phase, effective_taint_.value_or(*taint_)), pods_.snapshot());
    if (!first.ok()) {
      for (const auto& d : first.decisions) {
        if (d.verdict == Verdict::kError) log_decision(d);
      }
      return refusal(what, first.errors);
    }
    if (!client_reset_needs_taint(first)) {
      for (const auto& d : first.decisions) log_decision(d);
      spdlog::info("No {} to reset on node {}", what, settings_.node_name);
      return ok_status();
    }
  }

  if (auto t = ensure_taint(); !t) return t;
  if (cancel.cancelled()) return Error("terminated by SIGTERM");

  // Second look after tainting: a client bound to the node in between is not missed.
  auto pods = relist(cancel);
  if (!pods) return pods.error();
  const PodPipeline pl = pipeline(phase, effective_taint_);
  const PodListDecision decision = decide_pods(pl, *pods);
  for (const auto& d : decision.decisions) log_decision(d);
  if (!decision.ok()) return refusal(what, decision.errors);

  const std::vector<EvictionTarget> targets = targets_of(decision);
  if (targets.empty()) {
    spdlog::info("No {} left to reset on node {}", what, settings_.node_name);
    return ok_status();
  }

  spdlog::info("Resetting {} {} on node {} (deadline {})", targets.size(), what, settings_.node_name,
               settings_.gpu_client_eviction_timeout == Duration::zero()
                   ? std::string("none")
                   : format_duration(settings_.gpu_client_eviction_timeout, DurationStyle::kWholeSeconds));
  if (auto s = evict(targets, what, cancel); !s) return s;
  warn_about_replacements(targets, pl);
  return ok_status();
}

Status GpuClientReset::evict(const std::vector<EvictionTarget>& targets, const std::string& what,
                             const CancelToken& cancel) {
  const Duration timeout = settings_.gpu_client_eviction_timeout;
  EvictionOptions eo;
  eo.what = what;
  eo.retry_interval = settings_.eviction_retry_interval;
  const Deadline deadline = timeout == Duration::zero() ? Deadline::none() : Deadline::after(clock_, timeout);
  auto s = evict_pods(client_, pods_, clock_, targets, deadline, cancel, eo);
  if (!s) {
    if (cancel.cancelled()) return s.error();
    std::string hint;
    if (s.error().has_cause("DisruptionBudget")) {
      hint =
          "; a PodDisruptionBudget named above blocks the eviction: raise its allowance or scale the "
          "workload, "
          "or delete the pod by hand";
    }
    return Error(s.error().wrap("failed to reset " + what + " on node " + settings_.node_name).message +
                 hint + " (GPU_CLIENT_EVICTION_TIMEOUT=" +
                 (timeout == Duration::zero() ? std::string("0, no limit")
                                              : format_duration(timeout, DurationStyle::kWholeSeconds)) +
                 ")");
  }
  return ok_status();
}

PodListDecision GpuClientReset::decide_clients(const PodSnapshot& pods) const {
  if (!taint_) {
    PodListDecision refused;
    refused.errors.push_back("GPU_CLIENT_TAINT: " + taint_.error().message);
    return refused;
  }
  return decide_pods(pipeline(GpuClientPhase::kWithOperands, effective_taint_.value_or(*taint_)), pods);
}

Status GpuClientReset::evict_clients(const std::vector<EvictionTarget>& targets, const CancelToken& cancel) {
  if (targets.empty()) return ok_status();
  if (!taint_) return taint_.error().wrap("GPU_CLIENT_TAINT");
  if (auto t = ensure_taint(); !t) return t;
  if (cancel.cancelled()) return Error("terminated by SIGTERM");
  return evict(targets, phase_name(GpuClientPhase::kWithOperands), cancel);
}

Status GpuClientReset::remove_taint(TaintOps& taint) {
  if (!owned_) return ok_status();
  auto r = taint.remove_ours();
  if (!r) return r.error();
  owned_ = false;
  effective_taint_.reset();
  return ok_status();
}

}  // namespace dm::manager
