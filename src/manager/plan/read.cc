// `plan`'s reads (the node, its pods, the own pod, PodDisruptionBudgets, ResourceClaims, the host).
#include "manager/plan/read.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>

#include "host/mounts.h"
#include "kube/config.h"
#include "kube/objects.h"
#include "manager/commands/command.h"
#include "manager/commands/preflight.h"
#include "manager/plan/infer.h"
#include "manager/pods/dra_evidence.h"
#include "manager/pods/drain.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

constexpr const char* kResourceClaims = "/apis/resource.k8s.io/v1/resourceclaims";

}  // namespace

std::string read_error(const std::string& what, const Error& e) {
  if (e.forbidden()) {
    return what + ": forbidden (" + e.message + ")";
  }
  return what + ": " + e.message;
}

namespace {

// Mount points under the driver root, shown as host paths (a simulated host's root prefix dropped).
void read_mounts(host::Host& host, PlanInputs& in) {
  const std::string root = host.path(host::kDriverRoot);
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return;
  auto mounts = host::mounts_under(root);
  if (!mounts) {
    in.mounts_error = "cannot read the mount table: " + mounts.error().message;
    return;
  }
  const std::string canonical = std::filesystem::weakly_canonical(root, ec).string();
  for (const auto& m : *mounts) {
    in.mounts.push_back(
        m.rfind(canonical, 0) == 0 ? std::string(host::kDriverRoot) + m.substr(canonical.size()) : m);
  }
  std::reverse(in.mounts.begin(), in.mounts.end());  // outermost first, as they were mounted
}

void read_host(const Settings& settings, host::Host& host, PlanInputs& in) {
  in.host_driver_version = host.host_driver_version();
  in.can_unload = host.can_unload_nvidia();
  in.nvidia_loaded = host.module_loaded("nvidia");
  in.nouveau_loaded = host.module_loaded("nouveau");
  for (const auto name : host::kNvidiaModules) {
    if (!host.module_loaded(name)) continue;
    if (auto st = host.module_state(name)) in.modules.push_back(std::move(*st));
  }
  in.holders = host.nvidia_holder_processes();
  read_mounts(host, in);
  in.skip = read_skip_decision(settings, host);
  if (settings.gpu_direct_rdma_enabled) {
    in.mellanox_device = host.first_mellanox_device();
    in.mofed_ready = host.mofed_ready(settings.use_host_mofed ? host::Mofed::kHost : host::Mofed::kContainer);
  }
}

}  // namespace

std::string machine_hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "";
  return name.data();
}

void read_pdbs(kube::Api& client, PlanInputs& in) {
  // policy/v1 since Kubernetes 1.21; older API servers serve only v1beta1.
  for (const std::string version : {"v1", "v1beta1"}) {
    auto pdbs = client.list_all(kube::paths::pod_disruption_budgets(version));
    if (pdbs) {
      in.pdbs = std::move(*pdbs);
      in.pdb_version = version;
      in.pdb_error.clear();
      break;
    }
    in.pdb_error =
        read_error("cannot list PodDisruptionBudgets", pdbs.error()) +
        (pdbs.error().forbidden() ? ": which budgets would block the evictions is unknown (allow list on "
                                    "policy/poddisruptionbudgets to see them)"
                                  : "");
    if (!pdbs.error().not_found()) break;
  }
}

void read_claims(kube::Api& client, PlanInputs& in) {
  auto claims = client.list_all(kResourceClaims);
  if (claims) {
    in.claims = std::move(*claims);
    in.claims_note.clear();
  } else if (claims.error().not_found()) {
    in.claims = std::vector<Json>{};
    in.claims_note = "this API server serves no resource.k8s.io/v1: no DRA claims";
  } else {
    in.claims_note =
        read_error("cannot list ResourceClaims", claims.error()) + ": which pods hold GPU claims is unknown";
  }
}

Result<PlanInputs> read_plan_inputs(const Settings& settings, kube::Api& client, host::Host& host) {
  PlanInputs in;
  auto node = client.get(kube::paths::node(settings.node_name));
  if (!node) {
    if (node.error().not_found()) {
      return Error("node \"" + settings.node_name +
                   "\" not found: set NODE_NAME (--node-name) to the name of a Kubernetes node");
    }
    return Error(read_error("cannot read node \"" + settings.node_name + "\"", node.error()));
  }
  in.node = std::move(*node);
  in.read_at = SystemClock().wall_now();  // the lease in the node's annotations is as of now

  kube::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + settings.node_name;
  auto pods = client.list_all(kube::paths::pods(), opts);
  if (!pods) return Error(read_error("cannot list the pods of node " + settings.node_name, pods.error()));
  in.pods = std::move(*pods);
  std::sort(in.pods.begin(), in.pods.end(),
            [](const Json& a, const Json& b) { return kube::ref_string(a) < kube::ref_string(b); });
  in.facts = api_pod_facts(client);

  in.own_pod_ref =
      own_pod_ref(settings.pod_name, settings.pod_namespace, settings.hostname, settings.operator_namespace);
  if (auto own = find_own_pod(client, in.own_pod_ref); !own) {
    in.own_pod_error = read_error("cannot read this program's own pod", own.error());
  } else if (own->has_value()) {
    in.own_pod = std::move(**own);
  } else if (const auto uid = host.own_pod_uid()) {
    // Not named by POD_NAME or HOSTNAME: the pod of the node whose UID this program's cgroup names.
    for (const auto& pod : in.pods) {
      if (kube::uid(pod) != *uid) continue;
      in.own_pod_ref =
          OwnPodRef{kube::namespace_of(pod), kube::name(pod), "the pod UID of this program's cgroup"};
      if (auto found = find_own_pod(client, in.own_pod_ref); found) in.own_pod = std::move(*found);
    }
  }
  read_pdbs(client, in);
  read_claims(client, in);
  in.gpu_slices = read_gpu_slice_count(client, settings.node_name);
  if (!is_on_node(settings, in, machine_hostname())) {
    infer_host_from_api(settings, in, [&client](const std::string& ns, const std::string& name) {
      auto ds = client.get(kube::paths::daemonset(ns, name));
      return ds ? std::optional<Json>(std::move(*ds)) : std::nullopt;
    });
    return in;
  }
  read_host(settings, host, in);
  return in;
}

}  // namespace dm::manager
