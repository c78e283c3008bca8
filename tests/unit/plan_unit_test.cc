// `plan`'s decisions on JSON fixtures (no API server, no host: the inputs are built by hand), the PDB
// reading, the skip decision on a simulated host, and both renderers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "kube/objects.h"
#include "manager/commands/command.h"
#include "manager/node/lease.h"
#include "manager/plan/build.h"
#include "manager/plan/infer.h"
#include "manager/plan/read.h"
#include "manager/plan/render.h"
#include "manager/rules/node_keys.h"
#include "manager/rules/pdb.h"
#include "manager/rules/skip.h"
#include "support/process.h"

namespace dm::manager {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

Json node_with(const Json& labels, const Json& annotations = Json::object(), bool unschedulable = false) {
  return {{"metadata", {{"name", "n1"}, {"labels", labels}, {"annotations", annotations}}},
          {"spec", {{"unschedulable", unschedulable}}}};
}

Json pod(const std::string& ns, const std::string& name, const Json& labels = Json::object(),
         const Json& annotations = Json::object(), const std::string& owner_kind = "ReplicaSet",
         bool gpu = false) {
  Json p = {{"metadata",
             {{"namespace", ns},
              {"name", name},
              {"uid", "uid-" + name},
              {"labels", labels},
              {"annotations", annotations}}},
            {"spec", {{"nodeName", "n1"}, {"containers", Json::array({{{"name", "c"}}})}}},
            {"status", {{"phase", "Running"}}}};
  if (!owner_kind.empty()) {
    p["metadata"]["ownerReferences"] =
        Json::array({{{"kind", owner_kind}, {"name", name + "-owner"}, {"controller", true}}});
  }
  if (gpu) p["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  return p;
}

Settings settings() {
  Settings s;
  s.node_name = "n1";
  s.enable_auto_drain = false;
  s.driver_config_digest = "new";
  return s;
}

// A node with two operands, a client, a GPU workload, a plain pod, and a loaded, busy driver.
PlanInputs full_inputs() {
  PlanInputs in;
  in.node = node_with(
      {{"nvidia.com/gpu.deploy.device-plugin", "true"}, {"nvidia.com/gpu.deploy.dcgm-exporter", "true"}});
  in.pods = {pod("gpu-operator", "nvidia-device-plugin-daemonset-abcde",
                 {{"app", "nvidia-device-plugin-daemonset"}}, Json::object(), "DaemonSet"),
             pod("ml", "agent-1", {{"app", "agent"}}, {{"nvidia.com/gpu.client", "true"}}),
             pod("ml", "train-1", {{"app", "train"}}, Json::object(), "ReplicaSet", true),
             pod("web", "front-1", {{"app", "front"}})};
  in.pdbs = std::vector<Json>{
      {{"metadata", {{"namespace", "ml"}, {"name", "train-pdb"}}},
       {"spec", {{"selector", {{"matchLabels", {{"app", "train"}}}}}}},
       {"status",
        {{"disruptionsAllowed", 0}, {"currentHealthy", 1}, {"desiredHealthy", 1}, {"expectedPods", 1}}}},
      {{"metadata", {{"namespace", "web"}, {"name", "front-pdb"}}},
       {"spec", {{"selector", {{"matchLabels", {{"app", "front"}}}}}}},
       {"status", {{"disruptionsAllowed", 0}}}}};
  in.nvidia_loaded = true;
  in.modules = {{.name = "nvidia",
                 .loaded = true,
                 .builtin = false,
                 .unloadable = true,
                 .permanent = false,
                 .refcount = 2,
                 .holders = {},
                 .users = {"pid 7 (python3)"}}};
  in.holders = {{7, "python3", "uid-train-1", {"nvidia"}}};
  in.skip.summary = "the loaded driver's configuration digest differs from DRIVER_CONFIG_DIGEST";
  return in;
}

const PlanPod& find(const Plan& p, const std::string& ref) {
  for (const auto& pod : p.pods) {
    if (pod.pod == ref) return pod;
  }
  throw std::runtime_error("no pod " + ref);
}

TEST(Plan, FullPathGivesEachPodTheDecisionOfItsStep) {
  const Plan p = build_plan(settings(), full_inputs());
  EXPECT_EQ(p.flow.path, RunPath::kFull);
  EXPECT_TRUE(p.refusals.empty());
  ASSERT_EQ(p.labels.size(), 2U);
  for (const auto& l : p.labels) {
    EXPECT_EQ(l.from, "true");
    EXPECT_EQ(l.to, "paused-for-driver-upgrade");
    EXPECT_EQ(l.batch, "pause");
  }
  EXPECT_EQ(find(p, "gpu-operator/nvidia-device-plugin-daemonset-abcde").action, PodAction::kWait);
  EXPECT_EQ(find(p, "gpu-operator/nvidia-device-plugin-daemonset-abcde").step, "operands");
  EXPECT_EQ(find(p, "ml/agent-1").action, PodAction::kReset);
  EXPECT_EQ(find(p, "ml/train-1").action, PodAction::kEvict);
  EXPECT_EQ(find(p, "web/front-1").action, PodAction::kIgnored);
  EXPECT_EQ(find(p, "web/front-1").reason, "does not use a GPU");
  EXPECT_EQ(p.taint_action, TaintAction::kAdd);
  EXPECT_EQ(p.cordon, CordonAction::kCordon);
  // Only the budget covering a pod to evict, and it blocks.
  ASSERT_EQ(p.pdbs.size(), 1U);
  EXPECT_EQ(p.pdbs[0].pdb, "ml/train-pdb");
  EXPECT_TRUE(p.pdbs[0].blocks);
  ASSERT_EQ(p.holders.size(), 1U);
  EXPECT_EQ(p.holders[0], "nvidia: held by pid 7 (python3) in pod ml/train-1");
}

// The DRA driver from its own chart, not the operator's: `plan` shows the claim guard with why DRA counts as
// in use, and resets the chart's plugin in the DRA-plugin step without an annotation.
TEST(Plan, TheDraDriversOwnChartTurnsTheClaimGuardOnAndItsPluginGoesLast) {
  PlanInputs in = full_inputs();
  in.pods.push_back(pod("dra", "dra-driver-nvidia-gpu-kubelet-plugin-x1",
                        {{"app.kubernetes.io/name", "dra-driver-nvidia-gpu"},
                         {"dra-driver-nvidia-gpu-component", "kubelet-plugin"}},
                        Json::object(), "DaemonSet"));
  const auto steps_of = [](const Plan& p) {
    std::string all;
    for (const auto& s : p.steps) all += s + "\n";
    return all;
  };
  Plan p = build_plan(settings(), in);
  EXPECT_EQ(p.dra_in_use,
            "the NVIDIA DRA kubelet plugin runs here (dra/dra-driver-nvidia-gpu-kubelet-plugin-x1)");
  EXPECT_THAT(steps_of(p), HasSubstr("check that no pod still holds a GPU resource claim (DRA is in use: the "
                                     "NVIDIA DRA kubelet plugin runs here"));
  EXPECT_EQ(find(p, "dra/dra-driver-nvidia-gpu-kubelet-plugin-x1").action, PodAction::kReset);
  // The node's ResourceSlices come first.
  in.gpu_slices = 1;
  p = build_plan(settings(), in);
  EXPECT_EQ(p.dra_in_use, "the node has 1 gpu.nvidia.com ResourceSlice");
  // Without any of it there is no claim guard.
  p = build_plan(settings(), full_inputs());
  EXPECT_EQ(p.dra_in_use, "");
  EXPECT_THAT(steps_of(p), ::testing::Not(HasSubstr("GPU resource claim")));
}

TEST(Plan, UpgradePolicyLeavesGpuPodsToTheOperatorAndNeverCordons) {
  PlanInputs in = full_inputs();
  in.node["metadata"]["annotations"]["nvidia.com/gpu-driver-upgrade-enabled"] = "true";
  const Plan p = build_plan(settings(), in);
  EXPECT_TRUE(p.upgrade_policy);
  EXPECT_FALSE(p.gpu_pod_eviction);
  EXPECT_EQ(p.cordon, CordonAction::kNone);
  EXPECT_EQ(find(p, "ml/train-1").action, PodAction::kIgnored);
  EXPECT_THAT(find(p, "ml/train-1").reason, HasSubstr("upgrade policy"));
  EXPECT_EQ(find(p, "ml/agent-1").action, PodAction::kReset) << "clients are reset under the policy too";
}

TEST(Plan, AClientWithoutControllerIsRefusedAndNothingIsTainted) {
  PlanInputs in = full_inputs();
  in.pods.push_back(pod("ml", "loner", Json::object(), {{"nvidia.com/gpu.client", "true"}}, ""));
  const Plan p = build_plan(settings(), in);
  EXPECT_EQ(find(p, "ml/loner").action, PodAction::kRefused);
  ASSERT_EQ(p.refusals.size(), 1U);
  EXPECT_THAT(p.refusals[0], HasSubstr("ml/loner"));
  EXPECT_EQ(p.taint_action, TaintAction::kNone);
}

// A DaemonSet pod that the client label's pause takes off through its required node affinity (NVSentinel's
// two terms, pinned to the node by matchFields) is waited for with the operands, named with its rule; the
// same pod selecting the label by nodeSelector keeps upstream's wording.
TEST(Plan, DaemonSetSelectingTheClientLabelByNodeAffinityIsWaitedFor) {
  PlanInputs in = full_inputs();
  in.node["metadata"]["labels"]["nvidia.com/gpu.deploy.client"] = "true";
  Json agent = pod("nvsentinel", "health-agent-x1", {{"app", "health-agent"}}, Json::object(), "DaemonSet");
  agent["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
       ["nodeSelectorTerms"] = Json::parse(R"([
    {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client", "operator": "In", "values": ["true"]}],
     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
    {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client", "operator": "DoesNotExist"}],
     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])");
  Json selector_agent = pod("nvsentinel", "labelled-agent-x2", Json::object(), Json::object(), "DaemonSet");
  selector_agent["spec"]["nodeSelector"] = {{"nvidia.com/gpu.deploy.client", "true"}};
  in.pods.push_back(agent);
  in.pods.push_back(selector_agent);
  const Plan p = build_plan(settings(), in);
  EXPECT_EQ(find(p, "nvsentinel/health-agent-x1").action, PodAction::kWait);
  EXPECT_EQ(find(p, "nvsentinel/health-agent-x1").reason,
            "daemon set pods with node affinity on nvidia.com/gpu.deploy.client: its node label is paused");
  EXPECT_EQ(find(p, "nvsentinel/labelled-agent-x2").reason,
            "daemon set pods with nodeSelector key nvidia.com/gpu.deploy.client: its node label is paused");
  EXPECT_THAT(render_plan_text(p), HasSubstr("node affinity on nvidia.com/gpu.deploy.client"));
  // Without the label on the node (the affinity's second term), the pause takes nothing off.
  in.node["metadata"]["labels"].erase("nvidia.com/gpu.deploy.client");
  EXPECT_NE(find(build_plan(settings(), in), "nvsentinel/health-agent-x1").action, PodAction::kWait);
}

TEST(Plan, AGpuPodThatCannotBeEvictedIsRefused) {
  PlanInputs in = full_inputs();
  in.pods.push_back(pod("ml", "bare-gpu", Json::object(), Json::object(), "", true));
  const Plan p = build_plan(settings(), in);
  EXPECT_EQ(find(p, "ml/bare-gpu").action, PodAction::kRefused);
  ASSERT_EQ(p.refusals.size(), 1U);
  EXPECT_THAT(p.refusals[0], HasSubstr("Cannot delete all GPU pods"));
}

TEST(Plan, HostDriverTakesThePreInstalledPath) {
  PlanInputs in = full_inputs();
  in.host_driver_version = "550.54.15";
  const Plan p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kPreInstalled);
  ASSERT_EQ(p.labels.size(), 1U);
  EXPECT_EQ(p.labels[0].key, "nvidia.com/gpu.deploy.driver");
  EXPECT_EQ(p.labels[0].to, "pre-installed");
  for (const auto& pod : p.pods) EXPECT_EQ(pod.action, PodAction::kIgnored);
}

TEST(Plan, AnUnloadableKernelOrAnIntolerantOwnPodRefusesBeforeAnyWrite) {
  PlanInputs in = full_inputs();
  in.can_unload = Error("nvidia is built into the kernel");
  Plan p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kRefused);
  EXPECT_TRUE(p.labels.empty());
  ASSERT_EQ(p.refusals.size(), 1U);
  EXPECT_THAT(p.refusals[0], HasSubstr("built into the kernel"));

  in = full_inputs();
  OwnPod own;
  own.ref = "gpu-operator/driver-1";
  own.pod = pod("gpu-operator", "driver-1", Json::object(), Json::object(), "DaemonSet");
  in.own_pod = own;
  in.pods.push_back(own.pod);
  p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kRefused);
  ASSERT_TRUE(p.own_pod_tolerates.has_value());
  EXPECT_FALSE(*p.own_pod_tolerates);
  EXPECT_THAT(p.refusals[0], HasSubstr("does not tolerate the GPU client taint"));
  EXPECT_EQ(find(p, "gpu-operator/driver-1").reason, "this program's own pod");

  // Without a GPU client to reset no taint is added, and the same pod is no refusal.
  std::erase_if(in.pods, [](const Json& q) { return kube::name(q) == "agent-1"; });
  p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kFull);
  EXPECT_TRUE(p.refusals.empty()) << p.refusals[0];
  EXPECT_EQ(p.taint_action, TaintAction::kNone);
  EXPECT_THAT(p.own_pod_note, HasSubstr("no refusal: the run adds no taint"));
  // Nor where the node already carries a taint with the key and effect.
  in = full_inputs();
  in.own_pod = own;
  in.node["spec"]["taints"] =
      Json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}});
  EXPECT_TRUE(build_plan(settings(), in).refusals.empty());
}

// The skip path never unloads, so a kernel that cannot unload the driver does not refuse it.
TEST(Plan, AnUnloadableKernelKeepingTheDesiredDriverTakesTheSkipPath) {
  PlanInputs in = full_inputs();
  in.can_unload = Error("nvidia is built into the kernel");
  in.skip.skip = true;
  const Plan p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kSkip);
  EXPECT_TRUE(p.refusals.empty());
  EXPECT_TRUE(refuse_for_unloadable_driver(in.can_unload, SkipDecision{}));
  EXPECT_FALSE(refuse_for_unloadable_driver(in.can_unload, in.skip));
  EXPECT_FALSE(refuse_for_unloadable_driver(ok_status(), SkipDecision{}));
}

TEST(Plan, NoDriverAndSkipPathsEvictNoWorkload) {
  PlanInputs in = full_inputs();
  in.nvidia_loaded = false;
  in.holders.clear();
  Plan p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kNoDriver);
  EXPECT_TRUE(p.labels.empty());
  for (const auto& pod : p.pods) EXPECT_EQ(pod.action, PodAction::kIgnored) << pod.pod;

  in = full_inputs();
  in.skip.skip = true;
  p = build_plan(settings(), in);
  EXPECT_EQ(p.flow.path, RunPath::kSkip);
  EXPECT_EQ(find(p, "ml/agent-1").action, PodAction::kReset)
      << "clients go with the operands, before the skip";
  EXPECT_EQ(find(p, "ml/train-1").action, PodAction::kIgnored);
  EXPECT_EQ(p.cordon, CordonAction::kNone);
}

TEST(Plan, LeftoversOfAnEarlierRunAreNamed) {
  PlanInputs in = full_inputs();
  in.node["metadata"]["annotations"]["nvidia.com/gpu-driver-manager.tainted"] = "nvidia.com/gpu:NoSchedule";
  in.node["metadata"]["annotations"]["nvidia.com/gpu-driver-manager.cordoned"] = "true";
  in.node["spec"]["unschedulable"] = true;
  in.node["spec"]["taints"] = Json::array({{{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}});
  const Plan p = build_plan(settings(), in);
  ASSERT_EQ(p.leftovers.size(), 2U);
  EXPECT_THAT(p.leftovers[0], HasSubstr("kept on until the driver is unloaded"));
  EXPECT_THAT(p.leftovers[1], HasSubstr("uncordoned at the end"));
  EXPECT_EQ(p.taint_action, TaintAction::kAlreadyOurs);
  EXPECT_EQ(p.cordon, CordonAction::kAlreadyOurs);
}

TEST(Plan, TheEmptyOperandLabelsAnEarlierManagerLeftAreNamedWithThePause) {
  PlanInputs in = full_inputs();
  in.node["metadata"]["labels"]["nvidia.com/gpu.deploy.nvsm"] = "";
  in.node["metadata"]["labels"]["nvidia.com/gpu.deploy.dra-validator"] = "";
  const Plan p = build_plan(settings(), in);
  std::string steps;
  for (const auto& s : p.steps) steps += s + "\n";
  EXPECT_THAT(steps, HasSubstr("remove the empty operand labels an earlier driver manager left, with the "
                               "restore: nvidia.com/gpu.deploy.nvsm, nvidia.com/gpu.deploy.dra-validator"));
  EXPECT_EQ(p.labels.size(), 2U) << "the labels written by the pause are unchanged";
  EXPECT_THAT(build_plan(settings(), full_inputs()).steps,
              ::testing::Not(::testing::Contains(HasSubstr("remove the empty operand labels"))));
}

TEST(Plan, ALeaseIsJudgedAtTheTimeTheNodeWasRead) {
  using std::chrono::seconds;
  const auto read_at = std::chrono::system_clock::time_point(seconds(1'800'000'000));
  const auto with_lease = [&](seconds renewed_before,
                              std::optional<std::chrono::system_clock::time_point> at) {
    PlanInputs in = full_inputs();
    const LeaseRecord lease{.holder = "pod-a", .renewed = read_at - renewed_before, .duration = seconds(60)};
    in.node["metadata"]["annotations"][std::string(kLeaseAnnotation)] = lease.to_string();
    in.read_at = at;
    const Plan p = build_plan(settings(), in);
    EXPECT_EQ(p.leftovers.size(), 1U);
    return p.leftovers.empty() ? std::string() : p.leftovers[0];
  };
  EXPECT_THAT(with_lease(seconds(20), read_at), HasSubstr("a run holds the node's lease (pod-a, 40 s left)"));
  EXPECT_THAT(with_lease(seconds(61), read_at), HasSubstr("a lapsed lease of an earlier run (pod-a)"));
  // Built without a time of reading, a lease is neither live nor lapsed.
  EXPECT_THAT(with_lease(seconds(61), std::nullopt), HasSubstr("whether it is still held is unknown"));
}

TEST(Pdb, SelectorsFollowTheirApiVersion) {
  Json pdb = {{"spec", {{"selector", Json::object()}}}};
  EXPECT_TRUE(pdb_selector(pdb, "v1"));
  EXPECT_TRUE(pdb_selector(pdb, "v1")->empty()) << "policy/v1: an empty selector matches every pod";
  EXPECT_FALSE(pdb_selector(pdb, "v1beta1")) << "policy/v1beta1: an empty selector matches none";
  EXPECT_FALSE(pdb_selector(Json::object(), "v1"));

  pdb["spec"]["selector"] = {
      {"matchLabels", {{"app", "a"}}},
      {"matchExpressions", Json::array({{{"key", "tier"}, {"operator", "In"}, {"values", {"x", "y"}}},
                                        {{"key", "canary"}, {"operator", "DoesNotExist"}}})}};
  const auto sel = pdb_selector(pdb, "v1");
  ASSERT_TRUE(sel);
  EXPECT_TRUE(sel->matches({{"app", "a"}, {"tier", "y"}}));
  EXPECT_FALSE(sel->matches({{"app", "a"}, {"tier", "z"}}));
  EXPECT_FALSE(sel->matches({{"app", "a"}, {"tier", "x"}, {"canary", "1"}}));
}

TEST(Pdb, ABudgetWithFewerDisruptionsThanPodsToEvictBlocks) {
  const std::vector<Json> pods = {pod("ml", "a", {{"app", "t"}}), pod("ml", "b", {{"app", "t"}}),
                                  pod("other", "c", {{"app", "t"}})};
  const std::vector<Json> pdbs = {{{"metadata", {{"namespace", "ml"}, {"name", "p"}}},
                                   {"spec", {{"selector", {{"matchLabels", {{"app", "t"}}}}}}},
                                   {"status", {{"disruptionsAllowed", 1}}}}};
  const auto impacts = pdb_impacts(pdbs, "v1", pods);
  ASSERT_EQ(impacts.size(), 1U);
  EXPECT_EQ(impacts[0].pods, (std::vector<std::string>{"ml/a", "ml/b"}));
  EXPECT_TRUE(impacts[0].blocks);
  EXPECT_THAT(impacts[0].why, HasSubstr("allows 1 disruption(s) for 2 pod(s)"));
  EXPECT_FALSE(pdb_impacts(pdbs, "v1", {pods[0]})[0].blocks);
}

TEST(Skip, SettingsDecideAloneUnderForceReinstallOrWithoutADigest) {
  Settings s = settings();
  EXPECT_FALSE(skip_from_settings(s).has_value());  // the state file decides
  s.force_reinstall = true;
  const auto forced = skip_from_settings(s);
  ASSERT_TRUE(forced.has_value());
  EXPECT_FALSE(forced->skip);
  EXPECT_FALSE(forced->checked);
  s.force_reinstall = false;
  s.driver_config_digest.reset();
  const auto no_digest = skip_from_settings(s);
  ASSERT_TRUE(no_digest.has_value());
  EXPECT_FALSE(no_digest->skip);
  EXPECT_TRUE(no_digest->warning);
}

TEST(Skip, TheDriverStateFileDecidesOtherwise) {
  const Settings s = settings();
  using State = Result<std::optional<std::string>>;
  EXPECT_TRUE(skip_from_driver_state(s, State(std::optional<std::string>("new\n"))).skip);
  EXPECT_FALSE(skip_from_driver_state(s, State(std::optional<std::string>("old\n"))).skip);
  const auto none = skip_from_driver_state(s, State(std::optional<std::string>()));
  EXPECT_FALSE(none.skip);
  EXPECT_EQ(none.log_line, "No previous driver configuration found");
  const auto unreadable = skip_from_driver_state(s, State(Error("permission denied")));
  EXPECT_FALSE(unreadable.skip);
  EXPECT_TRUE(unreadable.warning);
  EXPECT_EQ(unreadable.log_line, "Failed to read driver config state file: permission denied");
}

TEST(Skip, ReadSkipDecisionReadsTheHostsStateFile) {
  const std::string root = test::make_temp_dir("dm-plan-skip");
  std::filesystem::create_directories(root + "/run/nvidia");
  auto host = host::make_host(root);
  Settings s = settings();
  EXPECT_FALSE(read_skip_decision(s, *host).skip);
  EXPECT_EQ(read_skip_decision(s, *host).log_line, "No previous driver configuration found");
  test::write_file(root + "/run/nvidia/nvidia-driver.state", "new\n");
  EXPECT_TRUE(read_skip_decision(s, *host).skip);
  s.force_reinstall = true;
  EXPECT_FALSE(read_skip_decision(s, *host).skip);
  std::filesystem::remove_all(root);
}

TEST(PlanRender, TextAndJsonCarryTheSameDecisions) {
  const Plan p = build_plan(settings(), full_inputs());
  const std::string text = render_plan_text(p);
  EXPECT_THAT(text, HasSubstr("Plan for node n1 (nothing was changed)"));
  EXPECT_THAT(text, HasSubstr("Path: full - "));
  EXPECT_THAT(text,
              HasSubstr("nvidia.com/gpu.deploy.dcgm-exporter true -> paused-for-driver-upgrade (pause)"));
  EXPECT_THAT(text, HasSubstr("ml/train-pdb BLOCKS (ml/train-1)"));
  EXPECT_THAT(text, HasSubstr("nvidia.com/gpu:NoSchedule: add - "));
  EXPECT_THAT(text, ::testing::ContainsRegex("\n  ml/agent-1 +reset +gpu-clients +designated GPU client\n"));

  const Json j = Json::parse(plan_to_json(p).dump());
  EXPECT_EQ(j["path"], "full");
  EXPECT_EQ(j["labels"].size(), 2U);
  EXPECT_EQ(j["taint"]["action"], "add");
  EXPECT_TRUE(j["ownPod"]["toleratesTaint"].is_null());
  ASSERT_EQ(j["pods"].size(), p.pods.size());
  for (size_t i = 0; i < p.pods.size(); ++i) {
    EXPECT_EQ(j["pods"][i]["pod"], p.pods[i].pod);
    EXPECT_EQ(j["pods"][i]["action"], action_name(p.pods[i].action));
    EXPECT_EQ(j["pods"][i]["reason"], p.pods[i].reason);
  }
  EXPECT_EQ(j["podDisruptionBudgets"][0]["blocks"], true);
  EXPECT_EQ(j["host"]["nvidiaLoaded"], true);
  EXPECT_EQ(j["host"]["modules"][0]["name"], "nvidia");
  EXPECT_EQ(j["host"]["holders"][0], "nvidia: held by pid 7 (python3) in pod ml/train-1");
}

}  // namespace
}  // namespace dm::manager
