// The wave's reads (one list per kind for the whole cluster), each node's plan from them, and the summary.
#include "manager/plan/wave.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "kube/objects.h"
#include "manager/commands/command.h"
#include "manager/commands/preflight.h"
#include "manager/plan/build.h"
#include "manager/plan/infer.h"
#include "manager/plan/read.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

constexpr const char* kDaemonSets = "/apis/apps/v1/daemonsets";
constexpr const char* kClusterPolicies = "/apis/nvidia.com/v1/clusterpolicies";

void read_daemonsets(kube::Api& client, WaveInputs& in) {
  kube::ListOptions opts;
  // Only the name and the pod template's containers are read (the driver's digest).
  opts.reduce = [](Json& ds) {
    if (ds.contains("metadata")) ds["metadata"].erase("managedFields");
    ds.erase("status");
  };
  auto ds = client.list_all(kDaemonSets, opts);
  if (ds) {
    in.daemonsets = std::make_shared<const std::vector<Json>>(std::move(*ds));
    return;
  }
  in.daemonsets_note = read_error("cannot list DaemonSets", ds.error()) +
                       ": a DaemonSet pod's controller is assumed to exist, and DRIVER_CONFIG_DIGEST is "
                       "not taken from the driver DaemonSet";
}

void read_runtime_classes(kube::Api& client, WaveInputs& in) {
  auto rcs = client.list_all("/apis/node.k8s.io/v1/runtimeclasses");
  if (!rcs) {
    in.runtime_classes_note = read_error("cannot list RuntimeClasses", rcs.error()) +
                              ": only pods on a class named nvidia, nvidia-cdi or nvidia-legacy (the "
                              "NVIDIA Container Toolkit's names) are counted as GPU pods through it";
    return;
  }
  auto handlers = std::make_shared<std::map<std::string, std::string>>();
  for (const auto& rc : *rcs) (*handlers)[kube::name(rc)] = kube::string_at(rc, {"handler"});
  in.runtime_handlers = std::move(handlers);
}

void read_cluster_policies(kube::Api& client, WaveInputs& in) {
  auto cps = client.list_all(kClusterPolicies);
  if (cps) {
    in.cluster_policies = std::move(*cps);
    return;
  }
  if (cps.error().not_found()) {
    in.cluster_policy_note =
        "no ClusterPolicy resource (nvidia.com/v1 clusterpolicies: not found): the chart's defaults assumed";
  } else {
    in.cluster_policy_note =
        read_error("cannot list ClusterPolicies", cps.error()) + ": the chart's defaults assumed";
  }
}

// The driver pods keep their containers' environment and init containers (the digest, the skip decision);
// every other pod, operands included, loses what no pod rule reads.
std::function<void(Json&)> pod_reducer(const std::string& operator_namespace) {
  return [operator_namespace](Json& pod) {
    if (pod.contains("metadata")) pod["metadata"].erase("managedFields");
    if (!shaped_as_driver_pod(pod, operator_namespace)) kube::drop_unread_pod_fields(pod);
  };
}

}  // namespace

std::string WaveSelection::describe() const {
  return selector.empty() ? std::string("every node") : "the nodes with " + selector;
}

Result<WaveInputs> read_wave_inputs(const Settings& settings, const WaveSelection& selection,
                                    kube::Api& client) {
  WaveInputs in;
  kube::ListOptions node_opts;
  node_opts.label_selector = selection.selector;
  node_opts.limit = kPageSize;
  node_opts.reduce = [](Json& node) {
    if (node.contains("metadata")) node["metadata"].erase("managedFields");
    node.erase("status");  // conditions, capacity, images...: a plan reads a node's metadata and spec only
  };
  auto nodes = client.list_all(kube::paths::nodes(), node_opts);
  if (!nodes) return Error(read_error("cannot list the nodes", nodes.error()));
  in.nodes = std::move(*nodes);
  std::set<std::string> selected;
  for (const auto& node : in.nodes) selected.insert(kube::name(node));
  kube::ListOptions pod_opts;
  pod_opts.limit = kPageSize;
  // Each pod is kept compact as soon as it is parsed (a pod on another node not at all); the list itself
  // keeps nothing (an item reduced to null is dropped).
  pod_opts.reduce = [reduce = pod_reducer(settings.operator_namespace), &selected, &in](Json& pod) {
    if (selected.contains(kube::pod_node_name(pod))) {
      reduce(pod);
      if (!pod.contains("kind")) pod["kind"] = "Pod";  // a List's items carry no kind
      if (!pod.contains("apiVersion")) pod["apiVersion"] = "v1";
      in.pods.add(pod);
    }
    pod = nullptr;
  };
  auto pods = client.list_all(kube::paths::pods(), pod_opts);
  if (!pods) return Error(read_error("cannot list the pods", pods.error()));
  read_pdbs(client, in.shared);
  read_claims(client, in.shared);
  read_daemonsets(client, in);
  read_runtime_classes(client, in);
  read_cluster_policies(client, in);
  return in;
}

PlanInputs node_plan_inputs(const Settings& settings, const WaveInputs& in, Json node,
                            std::vector<Json> pods) {
  PlanInputs p;
  p.node = std::move(node);
  p.read_at = in.shared.read_at;
  p.pods = std::move(pods);
  std::sort(p.pods.begin(), p.pods.end(),
            [](const Json& a, const Json& b) { return kube::ref_string(a) < kube::ref_string(b); });
  p.pdbs = in.shared.pdbs;
  p.pdb_version = in.shared.pdb_version;
  p.pdb_error = in.shared.pdb_error;
  p.claims = in.shared.claims;
  p.claims_note = in.shared.claims_note;
  std::shared_ptr<const std::vector<Json>> claims;
  if (in.shared.claims) claims = std::make_shared<const std::vector<Json>>(*in.shared.claims);
  p.facts = listed_pod_facts(in.daemonsets, claims);
  p.facts.runtime_class_handler = [handlers = in.runtime_handlers](const std::string& name) {
    if (!handlers) return RuntimeClassInfo::unreadable();
    const auto it = handlers->find(name);
    return it == handlers->end() ? RuntimeClassInfo::missing() : RuntimeClassInfo::found(it->second);
  };
  const auto daemonsets = in.daemonsets;
  infer_host_from_api(settings, p,
                      [daemonsets](const std::string& ns, const std::string& name) -> std::optional<Json> {
                        if (!daemonsets) return std::nullopt;
                        for (const auto& ds : *daemonsets) {
                          if (kube::namespace_of(ds) == ns && kube::name(ds) == name) return ds;
                        }
                        return std::nullopt;
                      });
  return p;
}

std::vector<std::string> blocking_reasons(const Plan& plan) {
  std::vector<std::string> out = plan.refusals;
  for (const auto& b : plan.pdbs) {
    if (!b.blocks) continue;
    out.push_back(
        fmt::format("PodDisruptionBudget {} allows {} disruption(s) now and covers {} pod(s) to evict "
                    "({})",
                    b.pdb, b.disruptions_allowed, b.pods.size(), fmt::join(b.pods, ", ")));
  }
  return out;
}

WaveSummary summarise_wave(const std::vector<Plan>& plans, const UpgradePolicy& policy) {
  WaveSummary s;
  s.policy = policy;
  std::vector<std::chrono::milliseconds> times;
  for (const auto& p : plans) {
    s.nodes_by_path[std::string(path_name(p.flow.path))].push_back(p.node);
    for (const auto& pod : p.pods) {
      if (pod.action == PodAction::kWait || pod.action == PodAction::kReset ||
          pod.action == PodAction::kEvict)
        ++s.pods_by_category[pod.step];
    }
    if (auto on = blocking_reasons(p); !on.empty()) s.blocking.push_back({p.node, std::move(on)});
    for (const auto& c : p.clients_tolerating) s.clients_tolerating.push_back(p.node + ": " + c);
    s.dra_claims += static_cast<int64_t>(p.dra_claims.size());
    if (p.flow.path != RunPath::kPreInstalled) times.push_back(p.estimate.total);
  }
  s.nodes_estimated = static_cast<int64_t>(times.size());
  auto parallel = wave_parallelism(policy, s.nodes_estimated);
  if (!parallel) {
    s.estimate_note = parallel.error().message + ": no estimate";
    return s;
  }
  s.parallelism = *parallel;
  s.estimate = estimate_wave(times, s.parallelism.nodes_at_once);
  s.estimate_note = fmt::format(
      "each node: the longest termination grace period among its pods that go, plus {} measured overhead; "
      "the driver's own install is not included",
      human_duration(kMeasuredOverhead));
  if (!s.blocking.empty()) {
    s.estimate_note += fmt::format(
        "; the {} blocking node(s) take longer (until unblocked, or their deadline)", s.blocking.size());
  }
  if (!policy.auto_upgrade) {
    s.estimate_note += "; autoUpgrade is off: the driver pods are restarted by hand, not by the operator";
  }
  return s;
}

Wave build_wave(const Settings& settings, const WaveSelection& selection, WaveInputs in) {
  Wave w;
  w.selection = selection;
  w.requests = in.requests;
  std::vector<Json*> nodes;
  for (auto& n : in.nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(),
            [](const Json* a, const Json* b) { return kube::name(*a) < kube::name(*b); });
  w.nodes.reserve(nodes.size());
  for (Json* node : nodes) {
    Settings s = settings;
    s.node_name = kube::name(*node);
    auto pods = in.pods.take(s.node_name);
    w.nodes.push_back(build_plan(s, node_plan_inputs(s, in, std::move(*node), std::move(pods))));
    *node = nullptr;
  }
  UpgradePolicy policy;
  if (in.cluster_policies) {
    auto read = upgrade_policy_from(*in.cluster_policies);
    if (read) {
      policy = *read;
    } else {
      policy.source = read.error().message + ": the chart's defaults assumed";
    }
  } else {
    policy.source = in.cluster_policy_note;
  }
  w.summary = summarise_wave(w.nodes, policy);
  for (const auto& note :
       {in.shared.pdb_error, in.shared.claims_note, in.daemonsets_note, in.runtime_classes_note}) {
    if (!note.empty()) w.notes.push_back(note);
  }
  return w;
}

int run_plan_wave(const Settings& in_settings, const WaveSelection& selection, const std::string& output) {
  const Settings& settings = in_settings;
  // The node-only settings (vfio-manage, the simulated host) do not matter off the nodes.
  Settings checked = settings;
  checked.vfio_manage = "/proc/self/exe";
  checked.sim_root.clear();
  if (auto problems = settings_problems(checked, ""); !problems.empty()) {
    for (const auto& pr : problems) spdlog::critical("{}", pr);
    return 1;
  }
  auto connection = connect(settings, kube::ClientOptions());
  if (!connection) return 1;
  const uint64_t before = connection->client->request_count();
  SystemClock clock;
  const auto started = clock.now();
  auto inputs = read_wave_inputs(settings, selection, *connection->client);
  if (inputs) inputs->requests = connection->client->request_count() - before;
  if (!inputs) {
    spdlog::critical("plan failed: {} (with {})", inputs.error().message, connection->config.source);
    return 1;
  }
  inputs->shared.read_at = clock.wall_now();
  const auto read = clock.now();
  const size_t nodes = inputs->nodes.size();
  const size_t pods = inputs->pods.size();
  const uint64_t requests = inputs->requests;
  const Wave wave = build_wave(settings, selection, std::move(*inputs));
  spdlog::debug(
      "plan: read {} nodes and their {} pods with {} requests in {:.3f} s, planned them in {:.3f} s", nodes,
      pods, requests, std::chrono::duration<double>(read - started).count(),
      std::chrono::duration<double>(clock.now() - read).count());
  if (output == "json") {
    write_wave_json(wave, stdout);
  } else {
    std::fputs(render_wave_text(wave).c_str(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace dm::manager
