#include "manager/commands/own_pod.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "manager/rules/settings.h"

namespace dm::manager {

using Json = nlohmann::json;
using kube::Taint;

namespace {

OwnPod own_pod_of(Json pod) {
  OwnPod own;
  own.ref = kube::ref_string(pod);
  own.uid = kube::uid(pod);
  own.grace_period = std::chrono::seconds(kube::pod_grace_period_seconds(pod));
  own.pod = std::move(pod);
  return own;
}

}  // namespace

std::optional<OwnPodRef> own_pod_ref(const std::string& pod_name, const std::string& pod_namespace,
                                     const std::string& hostname, const std::string& operator_namespace) {
  if (!pod_name.empty()) {
    const std::string ns = pod_namespace.empty() ? operator_namespace : pod_namespace;
    return OwnPodRef{ns, pod_name,
                     pod_namespace.empty() ? "POD_NAME in OPERATOR_NAMESPACE" : "POD_NAMESPACE/POD_NAME"};
  }
  if (!hostname.empty() && !operator_namespace.empty()) {
    return OwnPodRef{operator_namespace, hostname, "HOSTNAME in OPERATOR_NAMESPACE"};
  }
  return std::nullopt;
}

void fill_pod_identity_from_env(Settings& settings) {
  for (auto [field, var] :
       {std::pair{&settings.pod_name, "POD_NAME"}, std::pair{&settings.pod_namespace, "POD_NAMESPACE"},
        std::pair{&settings.hostname, "HOSTNAME"}}) {
    if (const char* v = std::getenv(var); field->empty() && v != nullptr) *field = v;
  }
}

Result<std::optional<OwnPod>> find_own_pod(kube::Api& client, const std::optional<OwnPodRef>& ref) {
  if (!ref) return std::optional<OwnPod>{};
  auto got = client.get(kube::paths::pod(ref->ns, ref->name));
  if (!got) {
    if (got.error().not_found()) return std::optional<OwnPod>{};
    return got.error().wrap("failed to read this program's own pod " + ref->ns + "/" + ref->name + " (" +
                            ref->source + ")");
  }
  return std::optional<OwnPod>{own_pod_of(std::move(*got))};
}

Result<std::optional<OwnPod>> find_own_pod_by_uid(kube::Api& client, const std::string& node,
                                                  const std::string& uid) {
  kube::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node;
  auto pods = client.list_all(kube::paths::pods(), opts);
  if (!pods)
    return pods.error().wrap("failed to list the pods of node " + node + " to find this program's own");
  for (auto& pod : *pods) {
    if (kube::uid(pod) == uid) return std::optional<OwnPod>{own_pod_of(std::move(pod))};
  }
  return std::optional<OwnPod>{};
}

Duration cleanup_budget(Duration grace_period) {
  // The kubelet's SIGKILL comes exactly at the end of the grace period; leave room for the last request
  // in flight and the exit.
  constexpr auto kMargin = std::chrono::seconds(5);
  constexpr auto kMinimum = std::chrono::seconds(2);
  return std::max<Duration>(grace_period - kMargin, kMinimum);
}

std::optional<Error> check_tolerates_taint(const OwnPod& pod, const Taint& taint) {
  if (kube::tolerates(kube::pod_tolerations(pod.pod), taint)) return std::nullopt;
  return Error(fmt::format(
      "refusing to start: this pod ({}) does not tolerate the GPU client taint {}, so if it were deleted "
      "while the taint is on, the DaemonSet controller would not recreate it and nothing would remove the "
      "taint. Either add the toleration {{key: {}, operator: Exists, effect: {}}} to the driver DaemonSet "
      "(ClusterPolicy daemonsets.tolerations replaces the default list: keep nvidia.com/gpu in it), or set "
      "GPU_CLIENT_TAINT to a taint the pod tolerates (the default nvidia.com/gpu:NoSchedule). Nothing was "
      "changed",
      pod.ref, taint.to_string(), taint.key, taint.effect));
}

}  // namespace dm::manager
