// `driver-manager plan --all-nodes | --selector S` on a real control plane with five node-sim nodes in
// different situations: the skip path (its driver pod already runs the DaemonSet's new digest), a GPU
// workload a PodDisruptionBudget blocks, annotated GPU clients (one the taint keeps off, one that tolerates
// it), an idle node, and a node with a host-installed driver. The table is compared with a golden file
// (tests/fixtures/plan/wave.txt; pod-name hashes normalised, DM_UPDATE_GOLDEN=1 rewrites it), `-o json` is
// parsed back, the audit log shows only reads, and the number of requests does not grow with the number
// of nodes. DRA claims on JSON fixtures are covered by plan_wave_unit_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "fixtures/uninstall/fixture.h"
#include "support/golden.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

constexpr const char* kOperatorNs = "gpu-operator";
constexpr const char* kWaveLabel = "dm-test/wave";  // on all five nodes
constexpr const char* kPairLabel = "dm-test/pair";  // on two of them
constexpr const char* kPlanner = "wave-planner";

std::string operand_yaml(const std::string& app, const std::string& label) {
  return "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: " + app + "\n  namespace: " + kOperatorNs +
         "\nspec:\n  selector:\n    matchLabels:\n      app: " + app +
         "\n  template:\n    metadata:\n      labels:\n        app: " + app +
         "\n      annotations:\n        node-sim/terminate-after-seconds: \"0.3\"\n    spec:\n"
         "      terminationGracePeriodSeconds: 30\n      nodeSelector:\n        nvidia.com/gpu.deploy." +
         label +
         ": \"true\"\n      tolerations:\n      - key: nvidia.com/gpu\n        operator: Exists\n"
         "        effect: NoSchedule\n      containers:\n      - name: main\n        image: "
         "example.com/op:1\n";
}

// The driver DaemonSet as the operator deploys it: OnDelete, the digest in its init container.
std::string driver_yaml(const std::string& digest) {
  return std::string("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: nvidia-driver-daemonset\n") +
         "  namespace: " + kOperatorNs +
         "\nspec:\n  updateStrategy:\n    type: OnDelete\n  selector:\n    matchLabels:\n"
         "      app: nvidia-driver-daemonset\n  template:\n    metadata:\n      labels:\n"
         "        app: nvidia-driver-daemonset\n    spec:\n      terminationGracePeriodSeconds: 60\n"
         "      nodeSelector:\n        nvidia.com/gpu.deploy.driver: \"true\"\n      tolerations:\n"
         "      - key: nvidia.com/gpu\n        operator: Exists\n        effect: NoSchedule\n"
         "      initContainers:\n      - name: k8s-driver-manager\n        image: example.com/dm:1\n"
         "        env:\n        - name: DRIVER_CONFIG_DIGEST\n          value: \"" +
         digest + "\"\n      containers:\n      - name: driver\n        image: example.com/driver:1\n";
}

class PlanWave : public UninstallSuite {
 public:
  static void SetUpTestSuite() {
    UninstallSuite::SetUpTestSuite();
    cluster().apply(read_file(source_path("deploy/clusterrole-plan.yaml")));
    planner_kubeconfig_ = cluster().service_account_kubeconfig(kSaNamespace, kPlanner, "driver-manager-plan");
  }

 protected:
  static std::string planner() {
    return std::string("system:serviceaccount:") + kSaNamespace + ":" + kPlanner;
  }

  static DmRun plan(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {bin_path("driver-manager"), "plan"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto out = run_command(argv, {},
                           {{"KUBECONFIG", planner_kubeconfig_},
                            {"OPERATOR_NAMESPACE", kOperatorNs},
                            {"ENABLE_AUTO_DRAIN", "false"},
                            {"NODE_NAME", "\x01unset"},
                            {"DRIVER_CONFIG_DIGEST", "\x01unset"},
                            {"HOSTNAME", "\x01unset"},
                            {"POD_NAME", "\x01unset"},
                            {"POD_NAMESPACE", "\x01unset"}});
    last_stderr_ = out.err;
    return {out.exit_code, out.out};
  }

  // Pod-name hashes and the pod table's column widths (support/golden.h), a ReplicaSet's hash and the
  // indentation of warnings (it follows the names) change from run to run.
  static std::string normalise(const std::string& text) {
    const std::string t = std::regex_replace(
        normalise_pod_names(text), std::regex("(ReplicaSet/[a-z0-9-]+?)-[bcdfghjklmnpqrstvwxz2-9]{8,10}\\b"),
        "$1-<rs>");
    return std::regex_replace(t, std::regex("\n +warning: "), "\n    warning: ");
  }

  // The audit events of the planner from `from` on that completed: one per request.
  static std::vector<json> completed(size_t from) {
    std::vector<json> out;
    for (const auto& e : requests_of(cluster(), planner(), from)) {
      if (e.value("stage", "") == "ResponseComplete") out.push_back(e);
    }
    return out;
  }

  inline static std::string planner_kubeconfig_;
  inline static std::string last_stderr_;
};

TEST_F(PlanWave, FiveNodesOneListPerKindNothingWritten) {
  kubectl_ok(cluster(), {"create", "namespace", kOperatorNs});
  ASSERT_TRUE(eventually([&] {
    auto o = cluster().kubectl(
        {"-n", kOperatorNs, "get", "serviceaccount", "default", "-o", "jsonpath={.metadata.name}"});
    return o.exit_code == 0 && !o.out.empty();
  }));
  std::map<std::string, std::unique_ptr<Scenario>> nodes;
  for (const char* n : {"w-clients", "w-host", "w-idle", "w-pdb", "w-skip"}) {
    nodes[n] = std::make_unique<Scenario>(cluster(), n);
    std::map<std::string, std::string> labels = {{kWaveLabel, "all"}};
    if (std::string(n) == "w-host") {
      labels["nvidia.com/gpu.deploy.driver"] = "pre-installed";
    } else {
      labels["nvidia.com/gpu.deploy.driver"] = "true";
      labels["nvidia.com/gpu.deploy.device-plugin"] = "true";
      labels["nvidia.com/gpu.deploy.dcgm-exporter"] = "true";
    }
    if (std::string(n) == "w-pdb" || std::string(n) == "w-idle") labels[kPairLabel] = "yes";
    nodes[n]->label_node(labels);
  }
  cluster().apply(operand_yaml("nvidia-device-plugin-daemonset", "device-plugin"));
  cluster().apply(operand_yaml("nvidia-dcgm-exporter", "dcgm-exporter"));
  cluster().apply(driver_yaml("digest-old"));
  Scenario& skip = *nodes["w-skip"];
  Scenario& pdb = *nodes["w-pdb"];
  Scenario& clients = *nodes["w-clients"];
  skip.deploy_gpu_workload("train");
  pdb.deploy_gpu_workload("train");
  pdb.block_with_pdb("train-budget", "train");
  Client kept;
  kept.name = "agent";
  clients.deploy_client(kept);
  Client tolerating;
  tolerating.name = "agent-tol";
  tolerating.grace_period_seconds = 45;
  tolerating.tolerations =
      json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  clients.deploy_client(tolerating);
  for (const char* n : {"w-clients", "w-idle", "w-pdb", "w-skip"}) nodes[n]->wait_running(kOperatorNs, 3);
  skip.wait_running(skip.workload_ns(), 1);
  pdb.wait_running(pdb.workload_ns(), 1);
  clients.wait_running(clients.workload_ns(), 2);
  // The operator updates the driver DaemonSet; only w-skip's driver pod has been replaced since.
  cluster().apply(driver_yaml("digest-new"));
  kubectl_ok(cluster(), {"-n", kOperatorNs, "delete", "pod", "-l", "app=nvidia-driver-daemonset",
                         "--field-selector", "spec.nodeName=w-skip", "--wait=true"});
  skip.wait_running(kOperatorNs, 1, "app=nvidia-driver-daemonset", 60);
  ASSERT_TRUE(eventually([&] {
    for (const auto& p : skip.pods_in(kOperatorNs, "app=nvidia-driver-daemonset")) {
      for (const auto& c : p["status"].value("conditions", json::array()))
        if (c.value("type", "") == "Ready" && c.value("status", "") == "True") return true;
    }
    return false;
  }));
  const auto node_before = skip.node_json();

  // The driver DaemonSet's nodes (the default selector): four of the five.
  const size_t from = cluster().audit_events().size();
  const auto text = plan({"--all-nodes"});
  ASSERT_EQ(text.exit_code, 0) << text.log << last_stderr_;
  // DM_WAVE_EXAMPLE=file keeps the output as printed (docs/plan.md shows it).
  if (const char* example = std::getenv("DM_WAVE_EXAMPLE")) write_file(example, text.log);
  // A server without resource.k8s.io/v1 (before Kubernetes 1.34) has its own golden: the plan notes that it
  // reads no DRA claims there.
  const bool dra_v1 = cluster().serves("resource.k8s.io/v1");
  expect_golden(dra_v1 ? "plan/wave.txt" : "plan/wave.without-dra-v1.txt", normalise(text.log));

  // All five, as JSON.
  const size_t from5 = cluster().audit_events().size();
  const auto five = plan({"--selector", std::string(kWaveLabel) + "=all", "-o", "json"});
  ASSERT_EQ(five.exit_code, 0) << five.log << last_stderr_;
  const size_t requests5 = completed(from5).size();
  const json w = json::parse(five.log);
  ASSERT_EQ(w["nodes"].size(), 5U) << w.dump(2);
  std::map<std::string, json> by_node;
  for (const auto& n : w["nodes"]) by_node[n["node"]] = n;
  EXPECT_EQ(by_node["w-skip"]["path"], "skip");
  EXPECT_THAT(by_node["w-skip"]["skipDecision"].get<std::string>(), HasSubstr("equals that of the template"));
  EXPECT_EQ(by_node["w-pdb"]["path"], "full");
  EXPECT_EQ(by_node["w-idle"]["path"], "full");
  EXPECT_EQ(by_node["w-clients"]["path"], "full");
  EXPECT_EQ(by_node["w-host"]["path"], "pre-installed");
  for (const auto& [name, n] : by_node) {
    EXPECT_EQ(n["host"]["onNode"], false) << name;
    EXPECT_THAT(n["host"]["unload"].get<std::string>(), HasSubstr("on the node only")) << name;
  }
  ASSERT_EQ(by_node["w-clients"]["clientsKeptOffByTaint"].size(), 1U);
  EXPECT_THAT(by_node["w-clients"]["clientsKeptOffByTaint"][0].get<std::string>(), HasSubstr("/agent-"));
  ASSERT_EQ(by_node["w-clients"]["clientsToleratingTaint"].size(), 1U);
  EXPECT_THAT(by_node["w-clients"]["clientsToleratingTaint"][0].get<std::string>(), HasSubstr("/agent-tol-"));
  EXPECT_EQ(by_node["w-clients"]["estimate"]["longestGracePeriodSeconds"], 45);
  EXPECT_EQ(by_node["w-idle"]["estimate"]["longestGracePeriodSeconds"], 30);
  ASSERT_EQ(by_node["w-pdb"]["podDisruptionBudgets"].size(), 1U);
  EXPECT_EQ(by_node["w-pdb"]["podDisruptionBudgets"][0]["blocks"], true);
  EXPECT_EQ(by_node["w-pdb"]["podDisruptionBudgets"][0]["disruptionsAllowed"], 0);
  // No claim is in use: no note when the server serves resource.k8s.io/v1, else a note that says so.
  EXPECT_EQ(by_node["w-pdb"]["draClaimsNote"].get<std::string>(),
            dra_v1 ? "" : "this API server serves no resource.k8s.io/v1: no DRA claims");
  const json& s = w["summary"];
  EXPECT_EQ(s["nodesByPath"]["full"], json({"w-clients", "w-idle", "w-pdb"}));
  EXPECT_EQ(s["nodesByPath"]["skip"], json({"w-skip"}));
  EXPECT_EQ(s["podsByStep"]["operands"], 8);
  EXPECT_EQ(s["podsByStep"]["gpu-clients"], 2);
  EXPECT_EQ(s["podsByStep"]["gpu-workloads"], 1);
  ASSERT_EQ(s["blockingNodes"].size(), 1U) << s.dump(2);
  EXPECT_EQ(s["blockingNodes"][0]["node"], "w-pdb");
  EXPECT_THAT(s["upgradePolicy"]["source"].get<std::string>(), HasSubstr("no ClusterPolicy resource"));
  EXPECT_EQ(s["estimate"]["nodesAtOnce"], 1);
  EXPECT_EQ(s["estimate"]["nodes"], 4);
  EXPECT_EQ(s["estimate"]["rounds"], 4);
  EXPECT_EQ(w["apiRequests"], requests5);

  // Two nodes cost the same requests as five: one list per kind, none per node.
  const size_t from2 = cluster().audit_events().size();
  const auto two = plan({"--selector", std::string(kPairLabel) + "=yes", "-o", "json"});
  ASSERT_EQ(two.exit_code, 0) << two.log << last_stderr_;
  EXPECT_EQ(json::parse(two.log)["nodes"].size(), 2U);
  EXPECT_EQ(completed(from2).size(), requests5);
  for (const auto& e : completed(from)) {
    EXPECT_TRUE(e.value("verb", "") == "list" || e.value("verb", "") == "get") << e.dump();
  }
  for (const auto& e : write_requests(cluster(), planner(), from))
    ADD_FAILURE() << "plan wrote: " << e.dump();
  EXPECT_EQ(skip.node_json()["metadata"]["labels"], node_before["metadata"]["labels"]);
  EXPECT_EQ(skip.node_json()["spec"], node_before["spec"]);
}

// The ClusterPolicy's upgrade policy, when the cluster has one, decides how many nodes go at once.
TEST_F(PlanWave, TheClusterPolicysUpgradePolicyIsRead) {
  cluster().apply(
      "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n"
      "  name: clusterpolicies.nvidia.com\nspec:\n  group: nvidia.com\n  scope: Cluster\n  names:\n"
      "    kind: ClusterPolicy\n    plural: clusterpolicies\n    singular: clusterpolicy\n  versions:\n"
      "  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n"
      "        type: object\n        x-kubernetes-preserve-unknown-fields: true\n");
  const std::string cp =
      "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n"
      "  driver:\n    upgradePolicy:\n      autoUpgrade: true\n      maxParallelUpgrades: 3\n"
      "      maxUnavailable: 50%\n";
  ASSERT_TRUE(eventually([&] { return cluster().kubectl({"apply", "-f", "-"}, cp).exit_code == 0; }, 30));
  Scenario a(cluster(), "cp-a");
  Scenario b(cluster(), "cp-b");
  Scenario c(cluster(), "cp-c");
  for (Scenario* s : {&a, &b, &c}) s->label_node({{"dm-test/cp", "yes"}});
  const auto out = plan({"--selector", "dm-test/cp=yes", "-o", "json"});
  ASSERT_EQ(out.exit_code, 0) << out.log << last_stderr_;
  const json s = json::parse(out.log)["summary"];
  EXPECT_EQ(s["upgradePolicy"]["maxParallelUpgrades"], 3);
  EXPECT_EQ(s["upgradePolicy"]["maxUnavailable"], "50%");
  EXPECT_THAT(s["upgradePolicy"]["source"].get<std::string>(), HasSubstr("ClusterPolicy cluster-policy"));
  // 50% of 3 nodes, rounded up, is 2: fewer than maxParallelUpgrades.
  EXPECT_EQ(s["estimate"]["nodesAtOnce"], 2);
  EXPECT_EQ(s["estimate"]["rounds"], 2);
}

TEST_F(PlanWave, BadSelectorAndNodeNameWithAWaveAreUsageErrors) {
  auto bad = plan({"--selector", "a in (b"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(last_stderr_, HasSubstr("invalid value \"a in (b\" for flag --selector"));
  auto both = plan({"--all-nodes", "--node-name", "x"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_THAT(last_stderr_, HasSubstr("give one or the other"));
}

}  // namespace
}  // namespace dm::test::uninstall
