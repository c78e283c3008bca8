#include "manager/commands/preflight.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

namespace dm::manager {

using Json = nlohmann::json;

bool is_dns1123_label(std::string_view s) {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return !s.empty() && s.size() <= 63 && std::regex_match(s.begin(), s.end(), re);
}

namespace {

bool is_dns1123_subdomain(std::string_view s) {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !s.empty() && s.size() <= 253 && std::regex_match(s.begin(), s.end(), re);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

bool is_qualified_name(std::string_view s) {
  static const std::regex name_re("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]");
  const auto slash = s.find('/');
  std::string_view name = s;
  if (slash != std::string_view::npos) {
    if (!is_dns1123_subdomain(s.substr(0, slash))) return false;
    name = s.substr(slash + 1);
  }
  return !name.empty() && name.size() <= 63 && std::regex_match(name.begin(), name.end(), name_re);
}

std::string resolve_executable(const std::string& program, const std::string& path_env) {
  if (program.empty()) return {};
  if (program.find('/') != std::string::npos) return is_executable_file(program) ? program : std::string{};
  std::istringstream dirs(path_env);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
  }
  return {};
}

std::vector<std::string> settings_problems(const Settings& s, const std::string& path_env) {
  std::vector<std::string> out;
  if (!is_dns1123_label(s.operator_namespace)) {
    out.push_back(fmt::format(
        "OPERATOR_NAMESPACE=\"{}\" is not a valid namespace name (lower-case letters, digits and '-', at "
        "most 63 characters)",
        s.operator_namespace));
  }
  if (!s.node_label_for_gpu_pod_eviction.empty() && !is_qualified_name(s.node_label_for_gpu_pod_eviction)) {
    out.push_back(fmt::format(
        "NODE_LABEL_FOR_GPU_POD_EVICTION=\"{}\" is not a valid node label key ([prefix/]name, the name at "
        "most 63 letters, digits, '-', '_' or '.')",
        s.node_label_for_gpu_pod_eviction));
  }
  if (!s.sim_root.empty() && !is_directory(s.sim_root)) {
    out.push_back(fmt::format("DRIVER_MANAGER_SIM_ROOT=\"{}\" is not an existing directory", s.sim_root));
  }
  if (resolve_executable(s.vfio_manage, path_env).empty()) {
    out.push_back(fmt::format(
        "VFIO_MANAGE_PATH=\"{}\": no such executable{} (it runs after the driver is unloaded, too late to "
        "find out then)",
        s.vfio_manage, s.vfio_manage.find('/') == std::string::npos ? " in PATH" : ""));
  }
  return out;
}

std::string AccessCheck::describe() const {
  std::string r = resource + (subresource.empty() ? "" : "/" + subresource);
  if (!group.empty()) r += "." + group;
  return verb + " " + r;
}

namespace {

using enum RunNeed;

// Each row as the code sends it (kube::Api get, list_all/list_identities, list_watch, patch, evict,
// create_event); `why` says what for. SelfSubjectAccessReviews need no row: every authenticated user may
// create them.
constexpr Permission kPermissions[] = {
    {.verb = "get",
     .resource = "nodes",
     .run = kAlways,
     .plan = true,
     .recover = true,
     .why = "reading the node: labels, annotations, taints"},
    {.verb = "patch",
     .resource = "nodes",
     .run = kAlways,
     .recover = true,
     .why = "labels, taint, cordon and the run's lease on the node"},
    {.verb = "list",
     .resource = "nodes",
     .run = kNotUsed,
     .plan = true,
     .why = "plan --all-nodes: the nodes of the wave"},
    {.verb = "get",
     .resource = "pods",
     .run = kAlways,
     .plan = true,
     .why = "its own pod; a pod the pod watch has not shown yet"},
    {.verb = "list", .resource = "pods", .run = kAlways, .plan = true, .why = "the pods on the node"},
    {.verb = "watch",
     .resource = "pods",
     .run = kOptional,
     .why = "the pod watch behind every wait (without it: a list every second)"},
    {.verb = "create",
     .resource = "pods/eviction",
     .run = kAlways,
     .why = "evicting GPU clients and workloads (PodDisruptionBudgets respected)"},
    {.verb = "create",
     .resource = "events",
     .run = kOptional,
     .why = "an Event on the node at the end of a run"},
    {.verb = "get",
     .resource = "daemonsets",
     .group = "apps",
     .run = kEviction,
     .plan = true,
     .why = "the drain filters check a pod's DaemonSet; the label pause reads its pod template"},
    {.verb = "list",
     .resource = "daemonsets",
     .group = "apps",
     .run = kNotUsed,
     .plan = true,
     .why = "plan --all-nodes: every DaemonSet at once"},
    {.verb = "get",
     .resource = "resourceclaims",
     .group = "resource.k8s.io",
     .run = kDra,
     .plan = true,
     .why = "finding pods that hold GPU claims"},
    {.verb = "list",
     .resource = "resourceclaims",
     .group = "resource.k8s.io",
     .run = kNotUsed,
     .plan = true,
     .why = "plan: every claim at once"},
    {.verb = "list",
     .resource = "resourceslices",
     .group = "resource.k8s.io",
     .run = kOptional,
     .plan = true,
     .why = "DRA in use on the node: its gpu.nvidia.com ResourceSlices"},
    {.verb = "get",
     .resource = "runtimeclasses",
     .group = "node.k8s.io",
     .run = kOptional,
     .plan = true,
     .why = "a pod's RuntimeClass handler (without it: judged by the class name)"},
    {.verb = "list",
     .resource = "runtimeclasses",
     .group = "node.k8s.io",
     .run = kNotUsed,
     .plan = true,
     .why = "plan --all-nodes: every RuntimeClass at once"},
    {.verb = "list",
     .resource = "poddisruptionbudgets",
     .group = "policy",
     .run = kNotUsed,
     .plan = true,
     .why = "plan: the budgets that would block an eviction"},
    {.verb = "list",
     .resource = "clusterpolicies",
     .group = "nvidia.com",
     .run = kNotUsed,
     .plan = true,
     .why = "plan --all-nodes: the driver's upgrade policy"},
};

bool run_needs(RunNeed need, const Settings& s, bool dra_on) {
  switch (need) {
    case kAlways:
      return true;
    case kEviction:
      return s.enable_gpu_pod_eviction || s.enable_auto_drain;
    case kDra:
      return dra_on;
    case kNotUsed:
    case kOptional:
      return false;
  }
  return false;
}

}  // namespace

std::span<const Permission> permissions() {
  return kPermissions;
}

std::vector<AccessCheck> uninstall_access_checks(const Settings& s, bool dra_on) {
  std::vector<AccessCheck> c;
  for (const Permission& p : kPermissions) {
    if (!run_needs(p.run, s, dra_on)) continue;
    const auto slash = p.resource.find('/');
    AccessCheck check;
    check.verb = p.verb;
    check.resource = p.resource.substr(0, slash);
    if (slash != std::string_view::npos) check.subresource = p.resource.substr(slash + 1);
    check.group = p.group;
    check.why = p.why;
    if (p.resource == "nodes") check.name = s.node_name;
    c.push_back(std::move(check));
  }
  return c;
}

namespace {

// How many reviews are in flight at once: a path needs a handful, and the client pools at most 8 connections.
constexpr size_t kConcurrentReviews = 4;

Result<bool> ask_access(kube::Api& client, const AccessCheck& c) {
  Json attrs = {{"verb", c.verb}, {"resource", c.resource}};
  if (!c.subresource.empty()) attrs["subresource"] = c.subresource;
  if (!c.group.empty()) attrs["group"] = c.group;
  if (!c.ns.empty()) attrs["namespace"] = c.ns;
  if (!c.name.empty()) attrs["name"] = c.name;
  const Json review = {{"apiVersion", "authorization.k8s.io/v1"},
                       {"kind", "SelfSubjectAccessReview"},
                       {"spec", {{"resourceAttributes", attrs}}}};
  auto r = client.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review);
  if (!r) return r.error();
  return r->contains("status") && (*r)["status"].value("allowed", false);
}

}  // namespace

// The reviews are independent questions: they are asked concurrently (kube::Api is thread-safe), and the
// answers are read in the order of `checks`, so the message is the same as if they were asked one by one.
Status check_access(kube::Api& client, const std::vector<AccessCheck>& checks) {
  std::vector<std::optional<Result<bool>>> answers(checks.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < checks.size(); i = next++) answers[i] = ask_access(client, checks[i]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(kConcurrentReviews, checks.size()); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  std::vector<std::string> denied;
  for (size_t i = 0; i < checks.size(); ++i) {
    const auto& answer = *answers[i];
    if (!answer) {
      spdlog::info("Could not ask the API server about permissions up front ({}); skipping that check",
                   answer.error().message);
      return ok_status();
    }
    if (!*answer) denied.push_back(fmt::format("{} ({})", checks[i].describe(), checks[i].why));
  }
  if (denied.empty()) return ok_status();
  return Error(fmt::format(
      "missing permissions, nothing was changed: {}. Bind the service account to a role with these rules "
      "(the GPU Operator's nvidia-driver ClusterRole has them; see deploy/clusterrole.yaml)",
      fmt::join(denied, "; ")));
}

}  // namespace dm::manager
