// `driver-manager plan` on a real control plane + node-sim: on the main scenarios (the full path with
// operands, annotated GPU clients, a GPU workload that a PodDisruptionBudget blocks and a client that would
// be refused; no driver loaded; the skip path) it prints what uninstall_driver would do - compared with
// golden files under tests/fixtures/plan (pod-name hashes and pids normalised; DM_UPDATE_GOLDEN=1 rewrites
// them) - and the API server's audit log shows that it only read. `-o json` is parsed back and checked field
// by field; a read it is not allowed is named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "fixtures/uninstall/fixture.h"
#include "support/golden.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPlanner = "planner";

class Plan : public UninstallSuite {
 public:
  static void SetUpTestSuite() {
    UninstallSuite::SetUpTestSuite();
    cluster().apply(read_file(source_path("deploy/clusterrole-plan.yaml")));
    plan_kubeconfig_ = cluster().service_account_kubeconfig(kSaNamespace, kPlanner, "driver-manager-plan");
    // An account allowed nothing at all.
    cluster().apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: nothing\nrules: "
        "[]\n");
    nothing_kubeconfig_ = cluster().service_account_kubeconfig(kSaNamespace, "nobody", "nothing");
  }

 protected:
  static std::string planner_user() {
    return std::string("system:serviceaccount:") + kSaNamespace + ":" + kPlanner;
  }

  // `driver-manager plan [args]` with the scenario's environment (that of uninstall_driver).
  static DmRun plan(const Scenario& s, const std::string& kubeconfig,
                    const std::vector<std::string>& args = {},
                    const std::map<std::string, std::string>& extra = {}) {
    std::vector<std::string> argv = {bin_path("driver-manager"), "plan"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::map<std::string, std::string> env = {
        {"HOSTNAME", "\x01unset"}, {"POD_NAME", "\x01unset"}, {"POD_NAMESPACE", "\x01unset"}};
    for (const auto& [k, v] : extra) env[k] = v;
    auto out = run_command(argv, {}, s.env(kubeconfig, env));
    last_stderr_ = out.err;
    return {out.exit_code, out.out};
  }

  // Pod-name hashes and the table's column widths (support/golden.h) and pids change from run to run.
  static std::string normalise(const std::string& text) {
    const std::string t = normalise_pod_names(std::regex_replace(text, std::regex("pid [0-9]+"), "pid <n>"));
    // Holder lines come in pid order, which follows the order node-sim started the pods in: sort them.
    std::vector<std::string> lines;
    std::istringstream in(t);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    auto holder = [](const std::string& l) { return l.find(": held by pid") != std::string::npos; };
    for (auto it = lines.begin(); it != lines.end();) {
      auto end = std::find_if_not(it, lines.end(), holder);
      std::sort(it, end);
      it = end == it ? end + 1 : end;
    }
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }

  // A server without resource.k8s.io/v1 (before Kubernetes 1.34) has its own golden: the plan says that it
  // reads no DRA claims there.
  static void expect_plan_golden(const std::string& name, const std::string& output) {
    const bool dra_v1 = cluster().serves("resource.k8s.io/v1");
    expect_golden("plan/" + name + (dra_v1 ? "" : ".without-dra-v1") + ".txt", normalise(output));
  }

  // No request of `user` from audit index `from` on wrote anything.
  static void expect_write_free(const std::string& user, size_t from) {
    const auto writes = write_requests(cluster(), user, from);
    for (const auto& w : writes) ADD_FAILURE() << "plan wrote: " << w.dump();
    const auto reads = requests_of(cluster(), user, from);
    EXPECT_FALSE(reads.empty()) << "the audit log shows the plan's reads";
  }

  // A pod's entry in the JSON plan, by the app label's prefix of its name.
  static json pod_entry(const json& plan, const std::string& prefix) {
    for (const auto& p : plan["pods"]) {
      if (p.value("pod", "").rfind(prefix, 0) == 0) return p;
    }
    ADD_FAILURE() << "no pod " << prefix << " in the plan";
    return json::object();
  }

  static void deploy_full(Scenario& s) {
    s.deploy_operands(default_operands());
    // The driver DaemonSet's pod: driver-manager's own pod, tolerating the default taint.
    cluster().apply(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: nvidia-driver-daemonset\n  namespace: " +
        s.operator_ns() +
        "\nspec:\n  selector:\n    matchLabels:\n      app: nvidia-driver-daemonset\n  template:\n"
        "    metadata:\n      labels:\n        app: nvidia-driver-daemonset\n    spec:\n"
        "      tolerations:\n      - key: nvidia.com/gpu\n        operator: Exists\n"
        "        effect: NoSchedule\n      nodeSelector:\n        " +
        std::string(kNodeLabel) + ": " + s.node() +
        "\n      containers:\n      - name: main\n        image: example.com/driver:1\n");
    // An annotated GPU client, a GPU workload its PDB blocks, and a pod that is nothing to the run.
    cluster().apply(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: agent\n  namespace: " + s.workload_ns() +
        "\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: agent\n  template:\n"
        "    metadata:\n      labels:\n        app: agent\n      annotations:\n"
        "        nvidia.com/gpu.client: \"true\"\n    spec:\n      nodeSelector:\n        " +
        std::string(kNodeLabel) + ": " + s.node() +
        "\n      containers:\n      - name: main\n        image: example.com/gpu-agent:1\n");
    s.deploy_gpu_workload("train");
    s.block_with_pdb("train-budget", "train");
    s.deploy_plain("web");
    s.wait_running(s.operator_ns(), default_operands().size() + 1);
    s.wait_running(s.workload_ns(), 3);
    write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-old\n");
  }

  // An annotated GPU client without a controller: its reset is refused.
  static void deploy_loner(const Scenario& s) {
    cluster().apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: loner\n  namespace: " + s.workload_ns() +
        "\n  labels:\n    app: loner\n  annotations:\n    nvidia.com/gpu.client: \"true\"\nspec:\n"
        "  nodeSelector:\n    " +
        std::string(kNodeLabel) + ": " + s.node() +
        "\n  containers:\n  - name: main\n    image: example.com/gpu-agent:1\n");
  }

  static std::string own_pod_name(const Scenario& s) {
    const auto pods = s.pods_in(s.operator_ns(), "app=nvidia-driver-daemonset");
    return pods.empty() ? std::string() : pods.front()["metadata"].value("name", "");
  }

  inline static std::string plan_kubeconfig_;
  inline static std::string nothing_kubeconfig_;
  inline static std::string last_stderr_;
};

TEST_F(Plan, FullPathNamesEveryPodsDecisionAndTheBlockingBudgetWithoutWriting) {
  Scenario s(cluster(), "plan-full");
  deploy_full(s);
  const auto node_before = s.node_json();
  const std::map<std::string, std::string> own = {{"POD_NAME", own_pod_name(s)},
                                                  {"POD_NAMESPACE", s.operator_ns()}};

  const size_t from = cluster().audit_events().size();
  const auto text = plan(s, plan_kubeconfig_, {}, own);
  ASSERT_EQ(text.exit_code, 0) << text.log << last_stderr_;
  expect_plan_golden("full", text.log);

  const auto j = plan(s, plan_kubeconfig_, {"-o", "json"}, own);
  ASSERT_EQ(j.exit_code, 0) << j.log << last_stderr_;
  const json p = json::parse(j.log);
  EXPECT_EQ(p["node"], s.node());
  EXPECT_EQ(p["path"], "full");
  EXPECT_EQ(p["gpuPodEviction"], true);
  EXPECT_EQ(p["autoDrain"], false);
  EXPECT_EQ(p["upgradePolicy"], false);
  EXPECT_THAT(p["skipDecision"].get<std::string>(), HasSubstr("differs from DRIVER_CONFIG_DIGEST"));
  // Every operand label paused, from "true".
  std::map<std::string, std::string> paused;
  for (const auto& l : p["labels"]) {
    EXPECT_EQ(l["from"], "true") << l.dump();
    EXPECT_EQ(l["batch"], "pause") << l.dump();
    paused[l["key"]] = l["to"];
  }
  for (const auto& op : default_operands()) {
    EXPECT_EQ(paused[deploy_label(op.label)], "paused-for-driver-upgrade") << op.label;
  }
  EXPECT_EQ(p["taint"]["taint"], "nvidia.com/gpu:NoSchedule");
  EXPECT_EQ(p["taint"]["action"], "add");
  EXPECT_EQ(p["ownPod"]["pod"], s.operator_ns() + "/" + own_pod_name(s));
  EXPECT_EQ(p["ownPod"]["toleratesTaint"], true);
  EXPECT_EQ(p["cordon"]["action"], "cordon");
  // The pods: operands waited for, the client reset, the workload evicted, web left alone.
  const std::string op = s.operator_ns() + "/";
  const std::string wl = s.workload_ns() + "/";
  EXPECT_EQ(pod_entry(p, op + "nvidia-dcgm-exporter-")["action"], "wait");
  EXPECT_EQ(pod_entry(p, op + "nvidia-dcgm-exporter-")["step"], "operands");
  EXPECT_EQ(pod_entry(p, op + "nvidia-driver-daemonset-")["reason"], "this program's own pod");
  EXPECT_EQ(pod_entry(p, wl + "agent-")["action"], "reset");
  EXPECT_EQ(pod_entry(p, wl + "agent-")["step"], "gpu-clients");
  EXPECT_EQ(pod_entry(p, wl + "train-")["action"], "evict");
  EXPECT_EQ(pod_entry(p, wl + "train-")["step"], "gpu-workloads");
  EXPECT_EQ(pod_entry(p, wl + "web-")["action"], "ignored");
  EXPECT_TRUE(p["refusals"].empty()) << p["refusals"].dump();
  // The budget of train allows no disruption.
  ASSERT_EQ(p["podDisruptionBudgets"].size(), 1U) << p.dump(2);
  const auto& b = p["podDisruptionBudgets"][0];
  EXPECT_EQ(b["pdb"], wl + "train-budget");
  EXPECT_EQ(b["blocks"], true);
  EXPECT_EQ(b["disruptionsAllowed"], 0);
  ASSERT_EQ(b["pods"].size(), 1U);
  EXPECT_THAT(b["pods"][0].get<std::string>(), HasSubstr(wl + "train-"));
  EXPECT_EQ(p["host"]["nvidiaLoaded"], true);
  EXPECT_FALSE(p["host"]["modules"].empty());
  EXPECT_EQ(p["host"]["hostDriverVersion"], "");

  expect_write_free(planner_user(), from);
  const auto node_after = s.node_json();
  EXPECT_EQ(node_after["metadata"]["labels"], node_before["metadata"]["labels"]);
  EXPECT_EQ(node_after["spec"], node_before["spec"]);

  // With the stock role (no PodDisruptionBudget list): the plan is printed and says what it could not read.
  const auto stock = plan(s, sa_kubeconfig(), {"--output=json"}, own);
  ASSERT_EQ(stock.exit_code, 0) << stock.log << last_stderr_;
  const json sp = json::parse(stock.log);
  EXPECT_TRUE(sp["podDisruptionBudgets"].empty());
  EXPECT_THAT(sp["podDisruptionBudgetsNote"].get<std::string>(),
              HasSubstr("cannot list PodDisruptionBudgets: forbidden"));
  EXPECT_EQ(sp["path"], "full");
}

TEST_F(Plan, NoDriverPathEvictsNothing) {
  NodeSimOptions o;
  o.no_driver = true;
  Scenario s(cluster(), "plan-nodriver", o);
  s.deploy_operands(default_operands());
  s.deploy_gpu_workload("train");
  s.wait_running(s.operator_ns(), default_operands().size());
  s.wait_running(s.workload_ns(), 1);

  const size_t from = cluster().audit_events().size();
  const auto text = plan(s, plan_kubeconfig_);
  ASSERT_EQ(text.exit_code, 0) << text.log << last_stderr_;
  expect_plan_golden("no-driver", text.log);
  const json p = json::parse(plan(s, plan_kubeconfig_, {"-o", "json"}).log);
  EXPECT_EQ(p["path"], "no-driver");
  EXPECT_TRUE(p["labels"].empty());
  EXPECT_EQ(p["host"]["nvidiaLoaded"], false);
  for (const auto& pod : p["pods"]) EXPECT_EQ(pod["action"], "ignored") << pod.dump();
  expect_write_free(planner_user(), from);
}

// The skip path bounces the operands and the annotated clients too: a client that cannot be reset makes it
// fail, before the taint.
TEST_F(Plan, SkipPathKeepsTheDriverAndWorkloadsAndNamesTheRefusedClient) {
  Scenario s(cluster(), "plan-skip");
  s.deploy_operands(default_operands());
  s.deploy_gpu_workload("train");
  deploy_loner(s);
  s.wait_running(s.operator_ns(), default_operands().size());
  s.wait_running(s.workload_ns(), 2);
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");

  const size_t from = cluster().audit_events().size();
  const std::map<std::string, std::string> same = {{"DRIVER_CONFIG_DIGEST", "digest-same"}};
  const auto text = plan(s, plan_kubeconfig_, {}, same);
  ASSERT_EQ(text.exit_code, 0) << text.log << last_stderr_;
  expect_plan_golden("skip", text.log);
  const json p = json::parse(plan(s, plan_kubeconfig_, {"-o", "json"}, same).log);
  EXPECT_EQ(p["path"], "skip");
  EXPECT_EQ(pod_entry(p, s.workload_ns() + "/train-")["action"], "ignored");
  EXPECT_EQ(pod_entry(p, s.operator_ns() + "/nvidia-device-plugin-daemonset-")["action"], "wait");
  EXPECT_EQ(p["cordon"]["action"], "none");
  const std::string wl = s.workload_ns() + "/";
  EXPECT_EQ(pod_entry(p, wl + "loner")["action"], "refused");
  EXPECT_THAT(pod_entry(p, wl + "loner")["reason"].get<std::string>(), HasSubstr("has no controller"));
  ASSERT_EQ(p["refusals"].size(), 1U) << p["refusals"].dump();
  EXPECT_THAT(p["refusals"][0].get<std::string>(), HasSubstr(wl + "loner"));
  EXPECT_EQ(p["taint"]["action"], "none");
  EXPECT_THAT(p["taint"]["reason"].get<std::string>(), HasSubstr("refused"));
  expect_write_free(planner_user(), from);
}

TEST_F(Plan, AForbiddenReadOrAMissingNodeIsAClearError) {
  Scenario s(cluster(), "plan-err");
  const auto forbidden = plan(s, nothing_kubeconfig_);
  EXPECT_EQ(forbidden.exit_code, 1);
  EXPECT_TRUE(forbidden.log.empty()) << "no plan printed";
  EXPECT_THAT(last_stderr_, HasSubstr("cannot read node \"plan-err\": forbidden"));

  const auto missing = plan(s, plan_kubeconfig_, {"--node-name", "no-such-node"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(last_stderr_, HasSubstr("node \"no-such-node\" not found"));

  const auto bad = plan(s, plan_kubeconfig_, {"-o", "yaml"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(last_stderr_, HasSubstr("invalid value \"yaml\" for flag -o/--output"));
}

}  // namespace
}  // namespace dm::test::uninstall
