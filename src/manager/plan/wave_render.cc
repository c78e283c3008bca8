// The wave's two renderings: a table and summary for people (each node's plan below it), JSON for tools
// whose `nodes` are the one-node plan's JSON (docs/plan.md).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string_view>

#include "manager/plan/render.h"
#include "manager/plan/wave.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

// Pods that go on one node, by the table's columns.
struct Counts {
  int64_t operands = 0;
  int64_t clients = 0;
  int64_t workloads = 0;
};

Counts count(const Plan& p) {
  Counts c;
  for (const auto& pod : p.pods) {
    if (pod.action != PodAction::kWait && pod.action != PodAction::kReset && pod.action != PodAction::kEvict)
      continue;
    if (pod.step == "operands" || pod.step == "dra-plugin") ++c.operands;
    if (pod.step == "gpu-clients" || pod.step == "dra-plugin-clients") ++c.clients;
    if (pod.step == "gpu-workloads") ++c.workloads;
  }
  return c;
}

void render_table(std::string& out, const Wave& w) {
  size_t width = 4;
  for (const auto& p : w.nodes) width = std::max(width, p.node.size());
  out += fmt::format("{:<{}}  {:<13}  {:>8}  {:>11}  {:>13}  {:>10}  {:<6}  {}\n", "NODE", width, "PATH",
                     "OPERANDS", "GPU CLIENTS", "GPU WORKLOADS", "DRA CLAIMS", "BLOCKS", "TIME OUT");
  for (const auto& p : w.nodes) {
    const Counts c = count(p);
    out += fmt::format("{:<{}}  {:<13}  {:>8}  {:>11}  {:>13}  {:>10}  {:<6}  {}\n", p.node, width,
                       path_name(p.flow.path), c.operands, c.clients, c.workloads, p.dra_claims.size(),
                       blocking_reasons(p).empty() ? "no" : "yes", human_duration(p.estimate.total));
  }
  if (w.nodes.empty()) out += "(no node selected)\n";
}

void render_summary(std::string& out, const WaveSummary& s, uint64_t requests) {
  out += "\nSummary:\n";
  std::vector<std::string> paths;
  for (const auto& [path, nodes] : s.nodes_by_path)
    paths.push_back(fmt::format("{} {} ({})", path, nodes.size(), fmt::join(nodes, ", ")));
  out += fmt::format("  nodes by path: {}\n",
                     paths.empty() ? "none" : fmt::format("{}", fmt::join(paths, "; ")));
  std::vector<std::string> pods;
  for (const auto& [step, n] : s.pods_by_category) pods.push_back(fmt::format("{} {}", step, n));
  out += fmt::format("  pods that go, by step: {}\n",
                     pods.empty() ? "none" : fmt::format("{}", fmt::join(pods, ", ")));
  out += fmt::format("  DRA claims in use: {}\n", s.dra_claims);
  out += "  would block or fail:" + std::string(s.blocking.empty() ? " none\n" : "\n");
  for (const auto& b : s.blocking) {
    for (const auto& on : b.on) out += "    " + b.node + ": " + on + "\n";
  }
  if (!s.clients_tolerating.empty()) {
    out += "  GPU clients the taint does not keep off (recreated at once):\n";
    for (const auto& c : s.clients_tolerating) out += "    " + c + "\n";
  }
  out += fmt::format("  upgrade policy: maxParallelUpgrades {}, maxUnavailable {}, autoUpgrade {} ({})\n",
                     s.policy.max_parallel_upgrades, s.policy.max_unavailable, s.policy.auto_upgrade,
                     s.policy.source);
  if (s.nodes_estimated > 0 && s.estimate.rounds > 0) {
    out += fmt::format("  nodes at once: {} ({})\n", s.parallelism.nodes_at_once, s.parallelism.note);
    out +=
        fmt::format("  wave estimate: about {} for {} node(s) in {} round(s) ({})\n",
                    human_duration(s.estimate.total), s.nodes_estimated, s.estimate.rounds, s.estimate_note);
  } else {
    out += "  wave estimate: " +
           (s.estimate_note.empty() ? std::string("no node to upgrade") : s.estimate_note) + "\n";
  }
  out += fmt::format("  API requests: {} (one list per kind for the whole cluster)\n", requests);
}

}  // namespace

std::string render_wave_text(const Wave& w) {
  std::string out = fmt::format("Plan for an upgrade wave over {} node(s) ({}; nothing was changed)\n\n",
                                w.nodes.size(), w.selection.describe());
  render_table(out, w);
  render_summary(out, w.summary, w.requests);
  if (!w.notes.empty()) {
    out += "\nNotes:\n";
    for (const auto& n : w.notes) out += "  " + n + "\n";
  }
  for (const auto& p : w.nodes) {
    const std::string title = "Node " + p.node;
    out += "\n" + title + "\n" + std::string(title.size(), '=') + "\n" + render_plan_text(p);
  }
  return out;
}

namespace {

// The wave's document without its nodes' plans ("nodes": []).
Json wave_frame_json(const Wave& w) {
  Json j;
  j["selector"] = w.selection.selector;
  j["nodes"] = Json::array();
  const WaveSummary& s = w.summary;
  Json sum;
  sum["nodes"] = w.nodes.size();
  sum["nodesByPath"] = Json::object();
  for (const auto& [path, nodes] : s.nodes_by_path) sum["nodesByPath"][path] = nodes;
  sum["podsByStep"] = Json::object();
  for (const auto& [step, n] : s.pods_by_category) sum["podsByStep"][step] = n;
  sum["draClaims"] = s.dra_claims;
  sum["blockingNodes"] = Json::array();
  for (const auto& b : s.blocking) sum["blockingNodes"].push_back({{"node", b.node}, {"on", b.on}});
  sum["clientsToleratingTaint"] = s.clients_tolerating;
  sum["upgradePolicy"] = {{"autoUpgrade", s.policy.auto_upgrade},
                          {"maxParallelUpgrades", s.policy.max_parallel_upgrades},
                          {"maxUnavailable", s.policy.max_unavailable},
                          {"source", s.policy.source}};
  sum["estimate"] = {{"seconds", static_cast<double>(s.estimate.total.count()) / 1000.0},
                     {"nodes", s.nodes_estimated},
                     {"nodesAtOnce", s.parallelism.nodes_at_once},
                     {"rounds", s.estimate.rounds},
                     {"parallelism", s.parallelism.note},
                     {"note", s.estimate_note}};
  j["summary"] = sum;
  j["notes"] = w.notes;
  j["apiRequests"] = w.requests;
  return j;
}

}  // namespace

Json wave_to_json(const Wave& w) {
  Json j = wave_frame_json(w);
  for (const auto& p : w.nodes) j["nodes"].push_back(plan_to_json(p));
  return j;
}

void write_wave_json(const Wave& w, std::FILE* out) {
  // dump(2) writes the top-level "nodes" key, two spaces in, as `"nodes": []` when empty; each plan goes
  // in its place, indented four spaces as dump(2) would indent an element of that array.
  const std::string frame = wave_frame_json(w).dump(2);
  static constexpr std::string_view kEmpty = "\n  \"nodes\": []";
  const size_t at = w.nodes.empty() ? std::string::npos : frame.find(kEmpty);
  if (at == std::string::npos) {
    std::fputs(frame.c_str(), out);
    std::fputc('\n', out);
    return;
  }
  const size_t open = at + kEmpty.size() - 1;  // the ']'
  std::fwrite(frame.data(), 1, open, out);
  bool first = true;
  for (const auto& p : w.nodes) {
    std::string element = plan_to_json(p).dump(2);
    std::string indented = first ? "\n    " : ",\n    ";
    first = false;
    for (const char c : element) {
      indented += c;
      if (c == '\n') indented += "    ";
    }
    std::fputs(indented.c_str(), out);
  }
  std::fputs("\n  ", out);
  std::fputs(frame.c_str() + open, out);
  std::fputc('\n', out);
}

}  // namespace dm::manager
