#include "manager/rules/pod_rules.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "manager/rules/dra_helpers.h"
#include "manager/rules/dra_plugin.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

FilterResult keep() {
  return {};
}
FilterResult warn(std::string why) {
  return {Verdict::kDelete, std::move(why)};
}
FilterResult skip(std::string why, Notice notice = Notice::kNormal) {
  return {Verdict::kSkip, std::move(why), notice};
}
FilterResult fail(std::string why) {
  return {Verdict::kError, std::move(why)};
}

std::string controller_name(const Json& pod) {
  const auto ref = kube::controller_ref(pod);
  if (!ref) return "none";
  return ref->kind + "/" + ref->name;
}

}  // namespace

ClientDesignation gpu_client_designation(const Json& pod) {
  const auto v = kube::annotation(pod, kGpuClientAnnotation);
  if (!v) return ClientDesignation::kNone;
  const auto b = parse_go_bool(*v);
  if (!b) return ClientDesignation::kInvalid;
  return *b ? ClientDesignation::kClient : ClientDesignation::kOptOut;
}

bool is_dra_plugin_client(const Json& pod) {
  const auto v = kube::annotation(pod, kGpuClientDraPluginAnnotation);
  return (v && parse_go_bool(*v).value_or(false)) || dra_chart_plugin_label(pod).has_value();
}

// ---------------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------------
std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::kDelete:
      return "evict";
    case Verdict::kSkip:
      return "skip";
    case Verdict::kWaitOnly:
      return "wait";
    case Verdict::kError:
      return "refuse";
  }
  return "?";
}

std::string PodDecision::log_line() const {
  std::string line = pod + ": " + std::string(to_string(verdict));
  if (!filter.empty()) line += " [" + filter + "]";
  if (!reason.empty()) line += ": " + reason;
  for (const auto& w : warnings) line += "; warning: " + w;
  return line;
}

PodPipeline::PodPipeline(std::string name, std::vector<PodFilter> filters, std::string delete_reason)
    : name_(std::move(name)), filters_(std::move(filters)), delete_reason_(std::move(delete_reason)) {}

PodDecision PodPipeline::decide(const Json& pod) const {
  PodDecision d;
  d.pod = kube::ref_string(pod);
  std::string why = delete_reason_;
  for (const auto& f : filters_) {
    FilterResult r = f.apply(pod);
    if (r.verdict == Verdict::kDelete) {
      if (r.names_why) {
        why = std::move(r.reason);
      } else if (!r.reason.empty()) {
        d.warnings.push_back(std::move(r.reason));
      }
      continue;
    }
    d.verdict = r.verdict;
    d.filter = f.name;
    d.reason = std::move(r.reason);
    d.notice = r.notice;
    return d;
  }
  d.verdict = Verdict::kDelete;
  d.reason = std::move(why);
  return d;
}

PodFilter daemonset_filter(DaemonSetPods existing, const DrainOptions& options, const PodFacts& facts) {
  return {"daemonset", [existing, force = options.force, exists = facts.daemonset_exists](const Json& pod) {
            const auto ref = kube::controller_ref(pod);
            if (!ref || ref->kind != "DaemonSet" || kube::pod_finished(pod)) return keep();
            const std::string& ds = ref->name;
            const std::string ns = kube::namespace_of(pod);
            if (exists) {
              Result<bool> r = exists(ns, ds);
              if (!r) return fail("cannot check its DaemonSet " + ns + "/" + ds + ": " + r.error().message);
              if (!*r) {
                if (force)
                  return warn("its DaemonSet " + ns + "/" + ds + " is gone; deleting the orphaned pod");
                return fail("its DaemonSet " + ns + "/" + ds +
                            " is gone (set DRAIN_USE_FORCE=true to delete such orphaned pods)");
              }
            }
            if (existing == DaemonSetPods::kRefuse) {
              return fail("cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)");
            }
            return skip("ignoring DaemonSet-managed Pods (DaemonSet " + ds + ")");
          }};
}

PodFilter mirror_filter(Verdict verdict) {
  return {
      "mirror", [verdict](const Json& pod) {
        if (!kube::pod_is_mirror(pod)) return keep();
        if (verdict == Verdict::kError) {
          return fail(
              "static (mirror) pod: the kubelet recreates it, so it cannot be reset by eviction; remove its "
              "manifest from the node or its " +
              std::string(kGpuClientAnnotation) + " annotation");
        }
        return FilterResult{verdict, "static (mirror) pod, managed by the kubelet"};
      }};
}

PodFilter emptydir_filter(const DrainOptions& options) {
  return {
      "emptydir", [delete_emptydir_data = options.delete_emptydir_data](const Json& pod) {
        if (!kube::pod_has_emptydir_volume(pod) || kube::pod_finished(pod)) return keep();
        if (!delete_emptydir_data) {
          return fail(
              "cannot delete Pods with local storage (emptyDir; set DRAIN_DELETE_EMPTYDIR_DATA=true to allow "
              "it)");
        }
        return warn("deleting Pods with local storage (emptyDir data is lost)");
      }};
}

PodFilter controller_filter(const DrainOptions& options) {
  return {"controller", [force = options.force](const Json& pod) {
            if (kube::pod_finished(pod) || kube::controller_ref(pod)) return keep();
            if (force) return warn("deleting Pods that declare no controller (DRAIN_USE_FORCE=true)");
            return fail(
                "cannot delete Pods that declare no controller: nothing would recreate it (set "
                "DRAIN_USE_FORCE=true to allow it)");
          }};
}

PodFilter gpu_filter(const PodFacts& facts) {
  return {"gpu", [claim = facts.holds_gpu_claim](const Json& pod) {
            if (kube::pod_declares_gpu_resource(pod)) return keep();
            if (claim) {
              Result<bool> r = claim(pod);
              if (!r) return fail("cannot check its resource claims: " + r.error().message);
              if (*r) return keep();
            }
            return skip("does not use a GPU");
          }};
}

PodFilter selector_filter(const LabelSelector& selector) {
  return {"selector", [selector](const Json& pod) {
            if (selector.empty()) return keep();
            const Json* labels = kube::find(pod, {"metadata", "labels"});
            if (selector.matches(labels != nullptr ? *labels : Json())) return keep();
            return skip("labels do not match pod selector " + selector.text());
          }};
}

PodFilter terminal_skip_filter() {
  return {"terminal", [](const Json& pod) {
            if (!kube::pod_finished(pod)) return keep();
            return skip("already finished (phase " + kube::pod_phase(pod) + ")");
          }};
}

PodFilter terminating_wait_filter() {
  return {"terminating", [](const Json& pod) {
            if (!kube::terminating(pod)) return keep();
            return FilterResult{Verdict::kWaitOnly, "already terminating; waiting for it to be gone"};
          }};
}

PodFilter dra_helper_filter() {
  return {"dra-helper", [](const Json& pod) {
            const auto helper = dra_helper_of(pod);
            if (!helper || kube::pod_finished(pod)) return keep();
            return skip(describe(*helper) + ": " + how_it_leaves(*helper) +
                        "; waited for before the plugin goes, never evicted (its controller would bring it "
                        "straight back)");
          }};
}

PodPipeline gpu_workload_pipeline(const DrainOptions& options, const PodFacts& facts) {
  return PodPipeline("gpu-workloads",
                     {dra_helper_filter(), daemonset_filter(DaemonSetPods::kIgnore, options, facts),
                      mirror_filter(Verdict::kSkip), emptydir_filter(options), controller_filter(options),
                      gpu_filter(facts)},
                     "GPU pod");
}

PodPipeline full_drain_pipeline(const DrainOptions& options, const LabelSelector& selector,
                                const PodFacts& facts) {
  return PodPipeline("drain",
                     {dra_helper_filter(), selector_filter(selector),
                      daemonset_filter(DaemonSetPods::kIgnore, options, facts), mirror_filter(Verdict::kSkip),
                      emptydir_filter(options), controller_filter(options)},
                     "drained");
}

namespace {

// The pods annotated as GPU clients (and the DRA driver's own plugin), with why the others are not.
PodFilter designation_filter() {
  const std::string ann(kGpuClientAnnotation);
  const std::string dra_ann(kGpuClientDraPluginAnnotation);
  return {"designation", [ann, dra_ann](const Json& pod) {
            switch (gpu_client_designation(pod)) {
              case ClientDesignation::kClient:
                return keep();
              case ClientDesignation::kOptOut:
                return skip("opted out (" + ann + "=false)");
              case ClientDesignation::kInvalid:
                return skip("annotation " + ann + "=\"" + kube::annotation(pod, ann).value_or("") +
                                "\" is not a boolean, so the pod is not reset and may keep the "
                                "driver busy (accepted: true, false, 1, 0, t, f, TRUE, FALSE, "
                                "True, False)",
                            Notice::kWarning);
              case ClientDesignation::kNone:
                break;
            }
            if (const auto chart = dra_chart_plugin_label(pod)) {
              // The DRA driver's own chart: a client by what it is, no annotation needed.
              return FilterResult{.reason =
                                      "the NVIDIA DRA kubelet plugin of the DRA driver's "
                                      "chart (" +
                                      *chart + "), a DRA plugin client by what it is",
                                  .names_why = true};
            }
            if (is_dra_plugin_client(pod)) {
              return skip("annotated " + dra_ann + " without " + ann + "=\"true\"; add " + ann +
                          ": \"true\" to have it reset");
            }
            return skip("not a designated GPU client", Notice::kQuiet);
          }};
}

// A client that tolerates the taint may be placed back at once: kept, with a warning.
PodFilter toleration_filter(const kube::Taint& taint) {
  return {"toleration", [taint](const Json& pod) {
            if (!kube::tolerates(kube::pod_tolerations(pod), taint)) return keep();
            return warn("tolerates the taint " + taint.to_string() + ", so its controller " +
                        controller_name(pod) +
                        " may recreate it on this node at once; for a DaemonSet, select "
                        "nvidia.com/gpu.deploy.client in its nodeSelector instead, or set "
                        "GPU_CLIENT_TAINT to a dedicated key that it does not tolerate and "
                        "add that key to ClusterPolicy daemonsets.tolerations (keeping "
                        "nvidia.com/gpu there)");
          }};
}

}  // namespace

PodPipeline gpu_client_pipeline(const GpuClientOptions& options) {
  const std::string ann(kGpuClientAnnotation);
  std::vector<PodFilter> filters;
  filters.push_back(dra_helper_filter());
  filters.push_back(designation_filter());
  filters.push_back({"phase", [phase = options.phase](const Json& pod) {
                       const bool plugin = is_dra_plugin_client(pod);
                       if (phase == GpuClientPhase::kWithOperands && plugin) {
                         return skip(
                             "DRA plugin client: reset after the GPU workloads, before the driver unload");
                       }
                       if (phase == GpuClientPhase::kDraPlugin && !plugin) {
                         return skip("not a DRA plugin client: reset with the operands");
                       }
                       return keep();
                     }});
  filters.push_back(terminal_skip_filter());
  filters.push_back({"node-label", [pause = options.label_pause](const Json& pod) {
                       const auto t = pause ? taken_off_by_pause(pod, *pause) : std::nullopt;
                       if (!t) return keep();
                       return skip(
                           "DaemonSet pod selecting node label " + t->key +
                           (t->rule == PlacementRule::kNodeAffinity ? " through its node affinity" : "") +
                           ": removed and waited for through that label");
                     }});
  filters.push_back(terminating_wait_filter());
  filters.push_back(mirror_filter(Verdict::kError));
  filters.push_back({"controller", [force = options.force, ann](const Json& pod) {
                       if (kube::controller_ref(pod)) return keep();
                       if (force) {
                         return warn(
                             "has no controller: eviction deletes it for good (DRAIN_USE_FORCE=true)");
                       }
                       return fail(
                           "has no controller, so eviction would delete it for good; set "
                           "DRAIN_USE_FORCE=true to allow that, or remove its " +
                           ann + " annotation");
                     }});
  if (options.taint) filters.push_back(toleration_filter(*options.taint));
  return PodPipeline("gpu-clients", std::move(filters), "designated GPU client");
}

namespace {

// A pod of either list: held by value, or shared with the pod watch's cache.
const Json& pod_at(const std::vector<Json>& pods, size_t i) {
  return pods[i];
}
const Json& pod_at(const PodSnapshot& pods, size_t i) {
  return *pods[i];
}

template <class Pods>
PodListDecision decide_pods_of(const PodPipeline& pipeline, const Pods& pods) {
  PodListDecision decision;
  for (size_t i = 0; i < pods.size(); ++i) {
    const Json& pod = pod_at(pods, i);
    PodDecision d = pipeline.decide(pod);
    switch (d.verdict) {
      case Verdict::kDelete:
        decision.to_evict.push_back(pod);
        break;
      case Verdict::kWaitOnly:
        decision.to_wait.push_back(pod);
        break;
      case Verdict::kError:
        decision.errors.push_back(d.pod + ": " + d.reason);
        break;
      case Verdict::kSkip:
        break;
    }
    decision.decisions.push_back(std::move(d));
  }
  return decision;
}

template <class Pods>
DaemonSetTemplates daemonset_templates_of_pods(const Pods& pods, const PodFacts& facts) {
  DaemonSetTemplates out;
  if (!facts.daemonset_template) return out;
  std::set<std::string> asked;
  for (size_t i = 0; i < pods.size(); ++i) {
    const Json& pod = pod_at(pods, i);
    const auto ref = kube::controller_ref(pod);
    if (!ref || ref->kind != "DaemonSet" || kube::pod_finished(pod)) continue;
    const std::string ns = kube::namespace_of(pod);
    if (!asked.insert(ns + "/" + ref->name).second) continue;
    if (auto t = facts.daemonset_template(ns, ref->name)) out[ns + "/" + ref->name] = std::move(*t);
  }
  return out;
}

template <class Pods>
Result<GpuEvictionDecision> decide_gpu_workload_eviction_of(const Pods& pods, const DrainOptions& options,
                                                            const PodFacts& facts) {
  // First, which pods use a GPU. One claim lookup per pod, reused by the pipeline.
  std::vector<bool> gpu(pods.size(), false);
  std::vector<GpuAccess> access(pods.size());
  GpuEvictionDecision out;
  std::vector<bool> helper(pods.size(), false);
  for (size_t i = 0; i < pods.size(); ++i) {
    const Json& pod = pod_at(pods, i);
    helper[i] = dra_helper_of(pod).has_value() && !kube::pod_finished(pod);
    if (helper[i]) continue;  // never a GPU pod here: the pipeline's dra-helper filter says why
    gpu[i] = kube::pod_declares_gpu_resource(pod);
    if (!gpu[i] && facts.holds_gpu_claim) {
      Result<bool> r = facts.holds_gpu_claim(pod);
      if (!r) return r.error().wrap("cannot check the resource claims of pod " + kube::ref_string(pod));
      gpu[i] = *r;
    }
    if (!gpu[i]) {
      auto a = gpu_access_without_request(pod, facts.runtime_class_handler);
      if (!a) return a.error().wrap("cannot check how pod " + kube::ref_string(pod) + " gets GPUs");
      access[i] = std::move(*a);
      gpu[i] = !access[i].why.empty();
    }
    if (gpu[i]) ++out.gpu_pods;
  }
  if (out.gpu_pods == 0) return out;

  PodFacts cached = facts;
  // The pipeline below only sees pods already known to use a GPU: no second claim lookup.
  cached.holds_gpu_claim = [](const Json&) -> Result<bool> { return true; };
  const PodPipeline pipeline = gpu_workload_pipeline(options, cached);
  for (size_t i = 0; i < pods.size(); ++i) {
    const Json& pod = pod_at(pods, i);
    PodDecision d;
    if (!helper[i] && !gpu[i]) {
      // A DRA driver helper goes through the pipeline, whose first filter keeps it. Non-GPU pods can never
      // be evicted here and their drain errors do not count (upstream's equality
      // rule compares GPU pods only), so decide them without asking the API about their DaemonSets.
      d.pod = kube::ref_string(pod);
      d.verdict = Verdict::kSkip;
      d.filter = "gpu";
      d.reason = "does not use a GPU";
      if (!access[i].note.empty()) {
        d.reason += "; " + access[i].note;
        d.notice = Notice::kWarning;
      }
    } else {
      d = pipeline.decide(pod);
    }
    const std::string& why = access[i].why;
    if (d.verdict == Verdict::kDelete) {
      if (!why.empty()) d.reason = "GPU pod without a GPU request: " + why;
      out.pods.to_evict.push_back(pod);
    } else if (gpu[i]) {
      // Equality rule: every GPU pod must be deletable.
      out.pods.errors.push_back(d.pod + ": GPU pod cannot be evicted: " + d.reason +
                                (why.empty() ? "" : " (a GPU pod without a GPU request: " + why + ")"));
    }
    out.pods.decisions.push_back(std::move(d));
  }
  return out;
}

}  // namespace

DaemonSetTemplates daemonset_templates_of(const std::vector<Json>& pods, const PodFacts& facts) {
  return daemonset_templates_of_pods(pods, facts);
}

DaemonSetTemplates daemonset_templates_of(const PodSnapshot& pods, const PodFacts& facts) {
  return daemonset_templates_of_pods(pods, facts);
}

PodListDecision decide_pods(const PodPipeline& pipeline, const std::vector<Json>& pods) {
  return decide_pods_of(pipeline, pods);
}

PodListDecision decide_pods(const PodPipeline& pipeline, const PodSnapshot& pods) {
  return decide_pods_of(pipeline, pods);
}

Result<GpuEvictionDecision> decide_gpu_workload_eviction(const std::vector<Json>& pods,
                                                         const DrainOptions& options, const PodFacts& facts) {
  return decide_gpu_workload_eviction_of(pods, options, facts);
}

Result<GpuEvictionDecision> decide_gpu_workload_eviction(const PodSnapshot& pods, const DrainOptions& options,
                                                         const PodFacts& facts) {
  return decide_gpu_workload_eviction_of(pods, options, facts);
}

}  // namespace dm::manager
