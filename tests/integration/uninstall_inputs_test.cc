// uninstall_driver refuses bad inputs before it changes anything: invalid environment values, a missing
// NODE_NAME, an unknown node, an unreadable kubeconfig, missing RBAC permissions. Each is a clear message
// and exit 1, and the API server's audit log shows no write request from the driver-manager's user.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fixtures/uninstall/fixture.h"
#include "kube/client.h"
#include "manager/commands/preflight.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

constexpr const char* kNode = "inputs";

class UninstallInputs : public UninstallSuite {
 public:
  static void SetUpTestSuite() {
    UninstallSuite::SetUpTestSuite();
    // A Node object is enough: every case fails before anything reads more than the node.
    cluster_->apply(std::string("apiVersion: v1\nkind: Node\nmetadata:\n  name: ") + kNode +
                    "\n  labels:\n    nvidia.com/gpu.deploy.device-plugin: \"true\"\n");
  }

 protected:
  static std::map<std::string, std::string> env(const std::string& kubeconfig,
                                                const std::map<std::string, std::string>& extra = {}) {
    std::map<std::string, std::string> e = {{"NODE_NAME", kNode},
                                            {"KUBECONFIG", kubeconfig},
                                            {"OPERATOR_NAMESPACE", "gpu-operator"},
                                            {"DRIVER_MANAGER_SIM_ROOT", make_temp_dir("dm-inputs")},
                                            {"VFIO_MANAGE_PATH", bin_path("vfio-manage")}};
    for (const auto& [k, v] : extra) e[k] = v;
    return e;
  }
  static CommandOutput run(const std::map<std::string, std::string>& e) {
    return run_command({bin_path("driver-manager"), "uninstall_driver"}, {}, e);
  }
  // A service account bound to a ClusterRole with only `rules` (YAML list items).
  static std::string limited_kubeconfig(const std::string& name, const std::string& rules) {
    cluster_->apply("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " +
                    name + "\nrules:\n" + rules);
    return cluster_->service_account_kubeconfig(kSaNamespace, name, name);
  }
  static std::string user(const std::string& sa) {
    return std::string("system:serviceaccount:") + kSaNamespace + ":" + sa;
  }
  void expect_node_untouched() {
    const auto node = cluster().get_json({"node", kNode});
    EXPECT_EQ(node["metadata"]["labels"].value("nvidia.com/gpu.deploy.device-plugin", ""), "true");
    EXPECT_FALSE(node["spec"].value("unschedulable", false));
  }
};

TEST_F(UninstallInputs, EachInvalidEnvironmentValueIsRefusedBeforeAnyApiRequest) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ENABLE_GPU_POD_EVICTION", "maybe"},
      {"ENABLE_AUTO_DRAIN", "yes"},
      {"DRAIN_USE_FORCE", "2"},
      {"DRAIN_DELETE_EMPTYDIR_DATA", "on"},
      {"GPU_DIRECT_RDMA_ENABLED", "enabled"},
      {"USE_HOST_MOFED", "x"},
      {"FORCE_REINSTALL", "sure"},
      {"UNCORDON_ALWAYS", "nah"},
      {"DRAIN_TIMEOUT_SECONDS", "ten"},
      {"OPERAND_WAIT_TIMEOUT", "5minutes"},
      {"GPU_CLIENT_EVICTION_TIMEOUT", "-"},
      {"MOFED_WAIT_TIMEOUT", "abc"},
      {"GPU_CLIENT_TAINT", "bad"},
      {"DRAIN_POD_SELECTOR_LABEL", "a in ("},
      {"LOG_FORMAT", "xml"},
      {"PRE_INSTALLED_SLEEP", "soon"},
  };
  for (const auto& [var, value] : cases) {
    const size_t from = cluster().audit_events().size();
    auto out = run(env(sa_kubeconfig(), {{var, value}}));
    EXPECT_EQ(out.exit_code, 1) << var << "=" << value << "\n" << out.err;
    EXPECT_THAT(out.err, HasSubstr(var)) << "the message names the variable";
    EXPECT_THAT(out.err, HasSubstr(value));
    EXPECT_TRUE(requests_of(cluster(), sa_user(), from).empty()) << var << ": no API request expected";
  }
  expect_node_untouched();
}

TEST_F(UninstallInputs, MissingNodeNameIsARequiredFlagError) {
  const size_t from = cluster().audit_events().size();
  auto out = run(env(sa_kubeconfig(), {{"NODE_NAME", "\x01unset"}}));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr("Required flag \"node-name\" not set"));
  EXPECT_TRUE(requests_of(cluster(), sa_user(), from).empty());
}

TEST_F(UninstallInputs, EmptyNodeNameIsRefused) {
  const size_t from = cluster().audit_events().size();
  auto out = run(env(sa_kubeconfig(), {{"NODE_NAME", ""}}));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr("NODE_NAME"));
  EXPECT_TRUE(write_requests(cluster(), sa_user(), from).empty());
}

TEST_F(UninstallInputs, UnknownNodeIsNamedAndNothingIsWritten) {
  const size_t from = cluster().audit_events().size();
  auto out = run(env(sa_kubeconfig(), {{"NODE_NAME", "no-such-node"}}));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr("node \"no-such-node\" not found"));
  EXPECT_THAT(out.err, HasSubstr("NODE_NAME"));
  EXPECT_TRUE(write_requests(cluster(), sa_user(), from).empty());
}

TEST_F(UninstallInputs, UnreadableKubeconfigIsNamed) {
  const std::string missing = make_temp_dir("dm-kc") + "/missing.kubeconfig";
  auto out = run(env(missing));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr(missing));
  // A directory is not a readable kubeconfig either.
  const std::string dir = make_temp_dir("dm-kc-dir");
  out = run(env(dir));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr(dir));
}

TEST_F(UninstallInputs, NoPermissionToReadTheNodeIsExplainedAndNothingIsWritten) {
  const auto kc = limited_kubeconfig("dm-no-nodes",
                                     "- apiGroups: [\"\"]\n  resources: [\"pods\"]\n  verbs: [\"list\", "
                                     "\"watch\"]\n");
  const size_t from = cluster().audit_events().size();
  auto out = run(env(kc));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr("not allowed to read node \"inputs\""));
  EXPECT_THAT(out.err, HasSubstr("deploy/clusterrole.yaml"));
  EXPECT_FALSE(requests_of(cluster(), user("dm-no-nodes"), from).empty()) << "the GET reached the API server";
  EXPECT_TRUE(write_requests(cluster(), user("dm-no-nodes"), from).empty());
  expect_node_untouched();
}

TEST_F(UninstallInputs, NoPermissionToListPodsIsExplainedAndNothingIsWritten) {
  const auto kc = limited_kubeconfig("dm-no-pods",
                                     "- apiGroups: [\"\"]\n  resources: [\"nodes\"]\n  verbs: [\"get\", "
                                     "\"patch\"]\n");
  const size_t from = cluster().audit_events().size();
  auto out = run(env(kc));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.err, HasSubstr("cannot list the pods of node inputs"));
  EXPECT_THAT(out.err, HasSubstr("deploy/clusterrole.yaml"));
  EXPECT_TRUE(write_requests(cluster(), user("dm-no-pods"), from).empty());
  expect_node_untouched();
}

// Names and paths that only the environment can get wrong are checked before any request: a bad
// vfio-manage path would otherwise only show after the driver was unloaded, on every retry.
TEST_F(UninstallInputs, BadNamesAndPathsAreRefusedBeforeAnyApiRequest) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"VFIO_MANAGE_PATH", "/nonexistent/vfio-manage"},
      {"VFIO_MANAGE_PATH", "no-such-vfio-manage-in-path"},
      {"OPERATOR_NAMESPACE", "Bad_NS!"},
      {"NODE_LABEL_FOR_GPU_POD_EVICTION", "bad key!"},
      {"DRIVER_MANAGER_SIM_ROOT", "/nonexistent/sim-root"},
  };
  for (const auto& [var, value] : cases) {
    const size_t from = cluster().audit_events().size();
    auto out = run(env(sa_kubeconfig(), {{var, value}}));
    EXPECT_EQ(out.exit_code, 1) << var << "=" << value << "\n" << out.err;
    EXPECT_THAT(out.err, HasSubstr(fmt::format("{}=\"{}\"", var, value)))
        << "the message names the variable and value";
    EXPECT_TRUE(requests_of(cluster(), sa_user(), from).empty()) << var << ": no API request expected";
  }
  expect_node_untouched();
}

// Permissions the run needs are asked of the API server before the first write: a role without
// `create pods/eviction` used to pause the labels and taint the node before the 403.
TEST_F(UninstallInputs, AMissingPermissionIsFoundBeforeAnyWrite) {
  const auto kc = limited_kubeconfig("dm-no-evict",
                                     "- apiGroups: [\"\"]\n  resources: [\"nodes\"]\n  verbs: [\"get\", "
                                     "\"patch\"]\n- apiGroups: [\"\"]\n  resources: [\"pods\"]\n  verbs: "
                                     "[\"get\", \"list\", \"watch\"]\n- apiGroups: [\"apps\"]\n  resources: "
                                     "[\"daemonsets\"]\n  verbs: [\"get\"]\n");
  const size_t from = cluster().audit_events().size();
  auto out = run(env(kc));
  EXPECT_EQ(out.exit_code, 1) << out.err;
  EXPECT_THAT(out.err, HasSubstr("missing permissions, nothing was changed: create pods/eviction"));
  EXPECT_THAT(out.err, HasSubstr("deploy/clusterrole.yaml"));
  EXPECT_FALSE(requests_of(cluster(), user("dm-no-evict"), from).empty());
  EXPECT_TRUE(write_requests(cluster(), user("dm-no-evict"), from).empty()) << "no write, no Event";
  expect_node_untouched();
}

// The reviews are asked together, yet the answer reads as if they were asked one by one: every denied
// permission, in the order of the checks, and each question reaches the API server once.
TEST_F(UninstallInputs, AccessReviewsAskedTogetherAnswerInTheOrderOfTheChecks) {
  const auto kc = limited_kubeconfig("dm-half",
                                     "- apiGroups: [\"\"]\n  resources: [\"nodes\"]\n  verbs: [\"patch\"]\n"
                                     "- apiGroups: [\"\"]\n  resources: [\"pods\"]\n  verbs: [\"list\"]\n");
  auto config = kube::load_config(kc);
  ASSERT_TRUE(config) << config.error().message;
  auto client = kube::Client::create(*config);
  ASSERT_TRUE(client) << client.error().message;
  using manager::AccessCheck;
  const std::vector<AccessCheck> checks = {
      {"patch", "nodes", "", "", "", kNode, "a"},
      {"create", "pods", "eviction", "", "", "", "b"},
      {"list", "pods", "", "", "", "", "c"},
      {"get", "daemonsets", "", "apps", "", "", "d"},
      {"watch", "pods", "", "", "", "", "e"},
      {"list", "resourceclaims", "", "resource.k8s.io", "", "", "f"},
      {"patch", "nodes", "", "", "", "other", "g"},
      {"delete", "nodes", "", "", "", kNode, "h"},
      {"list", "pods", "", "", "gpu-operator", "", "i"},
  };
  const size_t from = cluster().audit_events().size();
  auto denied = manager::check_access(**client, checks);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().message,
            "missing permissions, nothing was changed: create pods/eviction (b); get daemonsets.apps (d); "
            "watch pods (e); list resourceclaims.resource.k8s.io (f); delete nodes (h). Bind the service "
            "account to a role with these rules (the GPU Operator's nvidia-driver ClusterRole has them; see "
            "deploy/clusterrole.yaml)");
  size_t reviews = 0;
  for (const auto& e : requests_of(cluster(), user("dm-half"), from)) {
    if (e.value("stage", "") == "ResponseComplete" && e.contains("objectRef") &&
        e["objectRef"].value("resource", "") == "selfsubjectaccessreviews") {
      ++reviews;
    }
  }
  EXPECT_EQ(reviews, checks.size());

  // The least-privilege role has every permission of the main path.
  auto full_config = kube::load_config(sa_kubeconfig());
  ASSERT_TRUE(full_config);
  auto full = kube::Client::create(*full_config);
  ASSERT_TRUE(full);
  manager::Settings s;
  s.node_name = kNode;
  EXPECT_TRUE(manager::check_access(**full, manager::uninstall_access_checks(s, /*dra_on=*/true)));
}

}  // namespace
}  // namespace dm::test::uninstall
