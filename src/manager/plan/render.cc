// `plan`'s two renderings of one Plan: a table for people and JSON for tools (docs/plan.md).
#include "manager/plan/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "host/host.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

template <typename E>
struct Word {
  E value;
  std::string_view word;
};

constexpr std::array kPodActions{
    Word<PodAction>{PodAction::kWait, "wait"}, Word<PodAction>{PodAction::kReset, "reset"},
    Word<PodAction>{PodAction::kEvict, "evict"}, Word<PodAction>{PodAction::kRefused, "refused"},
    Word<PodAction>{PodAction::kIgnored, "ignored"}};
constexpr std::array kTaintActions{Word<TaintAction>{TaintAction::kNone, "none"},
                                   Word<TaintAction>{TaintAction::kAdd, "add"},
                                   Word<TaintAction>{TaintAction::kAlreadyOurs, "already-ours"},
                                   Word<TaintAction>{TaintAction::kPresentNotOurs, "present-not-ours"}};
constexpr std::array kCordonActions{Word<CordonAction>{CordonAction::kNone, "none"},
                                    Word<CordonAction>{CordonAction::kCordon, "cordon"},
                                    Word<CordonAction>{CordonAction::kAlreadyOurs, "already-ours"},
                                    Word<CordonAction>{CordonAction::kCordonedByOther, "cordoned-by-other"}};

template <typename E, size_t N>
std::string_view word_of(const std::array<Word<E>, N>& table, E value) {
  for (const auto& w : table) {
    if (w.value == value) return w.word;
  }
  return "?";
}

std::string on_off(bool b) {
  return b ? "on" : "off";
}

std::string or_absent(const std::string& v) {
  return v.empty() ? "<absent>" : v;
}

void section(std::string& out, const std::string& title) {
  out += "\n" + title + "\n";
}

// The pod table: one row per pod of the node, columns as wide as their longest cell.
void render_pods(std::string& out, const std::vector<PlanPod>& pods) {
  section(out, "Pods:");
  size_t w_pod = 3;
  size_t w_action = 6;
  size_t w_step = 4;
  for (const auto& pod : pods) {
    w_pod = std::max(w_pod, pod.pod.size());
    w_action = std::max(w_action, action_name(pod.action).size());
    w_step = std::max(w_step, pod.step.size());
  }
  out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", "POD", w_pod, "ACTION", w_action, "STEP", w_step,
                     "REASON");
  for (const auto& pod : pods) {
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}{}\n", pod.pod, w_pod, action_name(pod.action), w_action,
                       pod.step.empty() ? "-" : pod.step, w_step,
                       pod.filter.empty() ? "" : "[" + pod.filter + "] ", pod.reason);
    for (const auto& w : pod.warnings)
      out += fmt::format("  {:<{}}  warning: {}\n", "", w_pod + w_action + w_step + 4, w);
  }
  if (pods.empty()) out += "  (no pods on the node)\n";
}

void render_claims_and_time(std::string& out, const Plan& p) {
  section(out, "DRA claims in use:");
  if (!p.dra_claims_note.empty()) out += "  " + p.dra_claims_note + "\n";
  for (const auto& c : p.dra_claims) out += "  " + c.claim + " (held by " + c.pod + ")\n";
  if (p.dra_claims_note.empty() && p.dra_claims.empty()) out += "  none\n";
  section(out, "Time out:");
  out += "  about " + human_duration(p.estimate.total) + ": " +
         (p.estimate.longest_grace_pod.empty()
              ? std::string("no pod goes")
              : fmt::format("the longest grace period among the pods that go, {}s ({})",
                            p.estimate.longest_grace_seconds, p.estimate.longest_grace_pod)) +
         ", plus " + human_duration(kMeasuredOverhead) + " measured overhead\n";
}

void render_host(std::string& out, const Plan& p) {
  section(out, "Host:");
  if (!p.host_on_node) {
    out += "  on the node only: kernel modules, their holders, mounts (plan runs off the node)\n";
    out += "  inferred from the API: " + p.host_note + "\n";
  }
  out += "  host driver: " + (p.host_driver_version.empty() ? std::string("none") : p.host_driver_version) +
         "\n";
  out += "  nvidia loaded: " + std::string(p.nvidia_loaded ? "yes" : "no") + "; unload: " + p.unload + "\n";
  for (const auto& m : p.modules) {
    out += fmt::format("  module {}: refcount {}{}{}\n", m.name, m.refcount,
                       m.holders.empty() ? "" : fmt::format(", used by {}", fmt::join(m.holders, ",")),
                       m.users.empty() ? "" : fmt::format(", open by {}", fmt::join(m.users, ", ")));
  }
  for (const auto& h : p.holders) out += "  " + h + "\n";
  out += "  mounts under " + std::string(host::kDriverRoot) + ": " +
         (p.mounts.empty() ? (p.mounts_note.empty() ? std::string("none") : p.mounts_note)
                           : fmt::format("{}", fmt::join(p.mounts, ", "))) +
         "\n";
}

}  // namespace

std::string_view action_name(PodAction a) {
  return word_of(kPodActions, a);
}
std::string_view action_name(TaintAction a) {
  return word_of(kTaintActions, a);
}
std::string_view action_name(CordonAction a) {
  return word_of(kCordonActions, a);
}

std::string render_plan_text(const Plan& p) {
  std::string out;
  out += fmt::format("Plan for node {} (nothing was changed)\n", p.node);
  out += fmt::format("Path: {} - {}\n", path_name(p.flow.path), p.path_reason);
  out += fmt::format("Upgrade policy: {}; GPU pod eviction: {}; auto drain: {}\n", on_off(p.upgrade_policy),
                     on_off(p.gpu_pod_eviction), on_off(p.auto_drain));
  if (!p.skip.empty()) out += "Skip decision: " + p.skip + "\n";
  if (!p.refusals.empty()) {
    section(out, "Would fail:");
    for (const auto& r : p.refusals) out += "  " + r + "\n";
  }
  section(out, "Steps:");
  for (size_t i = 0; i < p.steps.size(); ++i) out += fmt::format("  {}. {}\n", i + 1, p.steps[i]);

  section(out, "Node labels:");
  if (p.labels.empty()) out += "  (none written)\n";
  for (const auto& l : p.labels) {
    out += fmt::format("  {} {} -> {} ({})\n", l.key, or_absent(l.from), l.to, l.batch);
  }
  section(out, "Taint:");
  out += fmt::format("  {}: {} - {}\n", p.taint, action_name(p.taint_action), p.taint_reason);
  out += "  own pod: " +
         (p.own_pod.empty() ? p.own_pod_note
                            : p.own_pod + " (" + p.own_pod_note + "), " +
                                  (p.own_pod_tolerates.value_or(false) ? "tolerates the taint"
                                                                       : "does NOT tolerate the taint")) +
         "\n";
  if (!p.clients_kept_off.empty())
    out += fmt::format("  kept off by it until the end: {}\n", fmt::join(p.clients_kept_off, ", "));
  if (!p.clients_tolerating.empty()) {
    out +=
        fmt::format("  tolerate it, so they come back at once: {}\n", fmt::join(p.clients_tolerating, ", "));
  }
  section(out, "Cordon:");
  out += "  " + std::string(action_name(p.cordon)) +
         (p.cordon_reason.empty() ? "" : " - " + p.cordon_reason) + "\n";

  render_pods(out, p.pods);

  section(out, "PodDisruptionBudgets:");
  if (!p.pdb_note.empty()) out += "  " + p.pdb_note + "\n";
  for (const auto& b : p.pdbs) {
    out += fmt::format("  {} {} ({}): {}\n", b.pdb, b.blocks ? "BLOCKS" : "allows", fmt::join(b.pods, ", "),
                       b.why);
  }
  if (p.pdb_note.empty() && p.pdbs.empty()) out += "  none covers a pod to evict\n";
  render_claims_and_time(out, p);
  render_host(out, p);
  if (!p.leftovers.empty()) {
    section(out, "Left by earlier runs:");
    for (const auto& l : p.leftovers) out += "  " + l + "\n";
  }
  if (!p.notes.empty()) {
    section(out, "Notes:");
    for (const auto& n : p.notes) out += "  " + n + "\n";
  }
  return out;
}

namespace {

// What the plan found on the host (or inferred of it off the node).
Json host_to_json(const Plan& p) {
  Json host;
  host["onNode"] = p.host_on_node;
  host["inferredFrom"] = p.host_note;
  host["hostDriverVersion"] = p.host_driver_version;
  host["nvidiaLoaded"] = p.nvidia_loaded;
  host["unload"] = p.unload;
  host["modules"] = Json::array();
  for (const auto& m : p.modules) {
    host["modules"].push_back(
        {{"name", m.name}, {"refcount", m.refcount}, {"usedBy", m.holders}, {"openBy", m.users}});
  }
  host["holders"] = p.holders;
  host["mounts"] = p.mounts;
  host["mountsNote"] = p.mounts_note;
  return host;
}

}  // namespace

Json plan_to_json(const Plan& p) {
  Json j;
  j["node"] = p.node;
  j["path"] = path_name(p.flow.path);
  j["pathReason"] = p.path_reason;
  j["refusals"] = p.refusals;
  j["steps"] = p.steps;
  j["upgradePolicy"] = p.upgrade_policy;
  j["gpuPodEviction"] = p.gpu_pod_eviction;
  j["autoDrain"] = p.auto_drain;
  j["skipDecision"] = p.skip;
  j["labels"] = Json::array();
  for (const auto& l : p.labels) {
    j["labels"].push_back({{"key", l.key}, {"from", l.from}, {"to", l.to}, {"batch", l.batch}});
  }
  j["taint"] = {{"taint", p.taint}, {"action", action_name(p.taint_action)}, {"reason", p.taint_reason}};
  j["ownPod"] = {{"pod", p.own_pod}, {"note", p.own_pod_note}};
  j["ownPod"]["toleratesTaint"] = p.own_pod_tolerates ? Json(*p.own_pod_tolerates) : Json(nullptr);
  j["cordon"] = {{"action", action_name(p.cordon)}, {"reason", p.cordon_reason}};
  j["pods"] = Json::array();
  for (const auto& pod : p.pods) {
    j["pods"].push_back({{"pod", pod.pod},
                         {"action", action_name(pod.action)},
                         {"step", pod.step},
                         {"reason", pod.reason},
                         {"filter", pod.filter},
                         {"warnings", pod.warnings}});
  }
  j["podDisruptionBudgets"] = Json::array();
  for (const auto& b : p.pdbs) {
    j["podDisruptionBudgets"].push_back({{"pdb", b.pdb},
                                         {"pods", b.pods},
                                         {"disruptionsAllowed", b.disruptions_allowed},
                                         {"blocks", b.blocks},
                                         {"reason", b.why}});
  }
  j["podDisruptionBudgetsNote"] = p.pdb_note;
  j["clientsKeptOffByTaint"] = p.clients_kept_off;
  j["clientsToleratingTaint"] = p.clients_tolerating;
  j["draClaims"] = Json::array();
  for (const auto& c : p.dra_claims) j["draClaims"].push_back({{"claim", c.claim}, {"pod", c.pod}});
  j["draClaimsNote"] = p.dra_claims_note;
  j["estimate"] = {{"seconds", static_cast<double>(p.estimate.total.count()) / 1000.0},
                   {"longestGracePeriodSeconds", p.estimate.longest_grace_seconds},
                   {"longestGracePeriodPod", p.estimate.longest_grace_pod},
                   {"overheadSeconds", static_cast<double>(kMeasuredOverhead.count()) / 1000.0}};
  j["host"] = host_to_json(p);
  j["leftovers"] = p.leftovers;
  j["notes"] = p.notes;
  return j;
}

}  // namespace dm::manager
