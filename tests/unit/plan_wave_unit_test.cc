// The wave's arithmetic (a node's time out, the upgrade policy, how many nodes at once, the wave's length),
// the host facts inferred off the node, DRA claims on JSON fixtures, the summary, and the JSON schema (each
// node is the one-node plan).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "manager/plan/build.h"
#include "manager/plan/infer.h"
#include "manager/plan/render.h"
#include "manager/plan/wave.h"
#include "manager/rules/upgrade_wave.h"
#include "support/process.h"

namespace dm::manager {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

Json fixture(const std::string& name) {
  return Json::parse(test::read_file(test::source_path("tests/fixtures/pods/" + name + ".json")));
}

TEST(PlanWaveTest, ANodesTimeOutIsItsLongestGracePeriodPlusTheOverhead) {
  const NodeEstimate e = estimate_node({"a/x", "b/y", "c/z"}, {30, 45, 5});
  EXPECT_EQ(e.longest_grace_seconds, 45);
  EXPECT_EQ(e.longest_grace_pod, "b/y");
  EXPECT_EQ(e.total, seconds(45) + kMeasuredOverhead);
  const NodeEstimate none = estimate_node({}, {});
  EXPECT_EQ(none.longest_grace_pod, "");
  EXPECT_EQ(none.total, kMeasuredOverhead);
}

TEST(PlanWaveTest, UpgradePolicyFromTheClusterPolicyOrTheChartsDefaults) {
  auto defaults = upgrade_policy_from({});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->max_parallel_upgrades, 1);
  EXPECT_EQ(defaults->max_unavailable, "25%");
  EXPECT_THAT(defaults->source, HasSubstr("chart's defaults"));

  const Json cp = {
      {"metadata", {{"name", "cluster-policy"}}},
      {"spec",
       {{"driver",
         {{"upgradePolicy", {{"autoUpgrade", false}, {"maxParallelUpgrades", 0}, {"maxUnavailable", 3}}}}}}}};
  auto p = upgrade_policy_from({cp});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_FALSE(p->auto_upgrade);
  EXPECT_EQ(p->max_parallel_upgrades, 0);
  EXPECT_EQ(p->max_unavailable, "3");
  EXPECT_THAT(p->source, HasSubstr("ClusterPolicy cluster-policy"));

  Json no_policy = cp;
  no_policy["spec"]["driver"].erase("upgradePolicy");
  EXPECT_THAT(upgrade_policy_from({no_policy})->source, HasSubstr("has no driver.upgradePolicy"));
  Json bad = cp;
  bad["spec"]["driver"]["upgradePolicy"]["maxParallelUpgrades"] = "two";
  EXPECT_FALSE(upgrade_policy_from({bad}));
  bad["spec"]["driver"]["upgradePolicy"]["maxParallelUpgrades"] = -1;
  EXPECT_FALSE(upgrade_policy_from({bad}));
}

TEST(PlanWaveTest, MaxUnavailableIsANumberOrAPercentageRoundedUp) {
  EXPECT_EQ(*resolve_max_unavailable("25%", 4), 1);
  EXPECT_EQ(*resolve_max_unavailable("25%", 5), 2);
  EXPECT_EQ(*resolve_max_unavailable("100%", 7), 7);
  EXPECT_EQ(*resolve_max_unavailable("0%", 7), 0);
  EXPECT_EQ(*resolve_max_unavailable("3", 100), 3);
  for (const char* bad : {"", "%", "x", "-1", "2.5", "12345678901"}) {
    EXPECT_FALSE(resolve_max_unavailable(bad, 10)) << bad;
  }
}

TEST(PlanWaveTest, NodesAtOnceIsTheSmallerLimitAndAtLeastOne) {
  UpgradePolicy p;  // 1, 25%
  EXPECT_EQ(wave_parallelism(p, 20)->nodes_at_once, 1);
  p.max_parallel_upgrades = 0;  // no limit: maxUnavailable decides
  EXPECT_EQ(wave_parallelism(p, 20)->nodes_at_once, 5);
  p.max_parallel_upgrades = 3;
  EXPECT_EQ(wave_parallelism(p, 20)->nodes_at_once, 3);
  p.max_unavailable = "0";
  const auto zero = wave_parallelism(p, 20);
  EXPECT_EQ(zero->nodes_at_once, 1);
  EXPECT_THAT(zero->note, HasSubstr("would not start"));
  p.max_unavailable = "lots";
  EXPECT_FALSE(wave_parallelism(p, 20));
}

TEST(PlanWaveTest, TheWaveTakesTheNodesThatManyAtATimeTheLongestFirst) {
  const std::vector<milliseconds> t = {seconds(30), seconds(30), seconds(30), seconds(45)};
  EXPECT_EQ(estimate_wave(t, 1).total, seconds(135));
  EXPECT_EQ(estimate_wave(t, 1).rounds, 4);
  // Two slots: 45 | 30, then 30 after the 30 (60), then 30 after the 45 (75).
  EXPECT_EQ(estimate_wave(t, 2).total, seconds(75));
  EXPECT_EQ(estimate_wave(t, 2).rounds, 2);
  EXPECT_EQ(estimate_wave(t, 10).total, seconds(45));
  EXPECT_EQ(estimate_wave(t, 10).rounds, 1);
  EXPECT_EQ(estimate_wave({}, 1).total, milliseconds(0));
}

TEST(PlanWaveTest, HumanDurations) {
  EXPECT_EQ(human_duration(milliseconds(750)), "750ms");
  EXPECT_EQ(human_duration(milliseconds(30750)), "30.8s");
  EXPECT_EQ(human_duration(seconds(138)), "2m18s");
  EXPECT_EQ(human_duration(seconds(3600 + 5)), "1h0m5s");
}

Json node(const std::string& name, const Json& labels) {
  return {{"metadata", {{"name", name}, {"labels", labels}}}, {"spec", Json::object()}};
}

Json pod_on(const std::string& node_name, const std::string& ns, const std::string& name, const Json& labels,
            const std::string& owner_kind, const std::string& owner) {
  return {
      {"metadata",
       {{"namespace", ns},
        {"name", name},
        {"uid", "uid-" + name},
        {"labels", labels},
        {"ownerReferences", Json::array({{{"kind", owner_kind}, {"name", owner}, {"controller", true}}})}}},
      {"spec", {{"nodeName", node_name}, {"containers", Json::array({{{"name", "c"}}})}}},
      {"status",
       {{"phase", "Running"}, {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

// The driver pod of `node_name`, its init container carrying `digest`.
Json driver_pod(const std::string& node_name, const std::string& digest) {
  Json p = pod_on(node_name, "gpu-operator", "nvidia-driver-daemonset-" + node_name,
                  {{"app", "nvidia-driver-daemonset"}}, "DaemonSet", "nvidia-driver-daemonset");
  p["spec"]["initContainers"] =
      Json::array({{{"name", "k8s-driver-manager"},
                    {"env", Json::array({{{"name", "DRIVER_CONFIG_DIGEST"}, {"value", digest}}})}}});
  p["spec"]["tolerations"] = Json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}});
  return p;
}

Json driver_daemonset(const std::string& digest) {
  Json ds = {{"metadata", {{"namespace", "gpu-operator"}, {"name", "nvidia-driver-daemonset"}}}};
  ds["spec"]["template"]["spec"] = driver_pod("x", digest)["spec"];
  return ds;
}

Settings wave_settings() {
  Settings s;
  s.enable_auto_drain = false;
  return s;
}

TEST(PlanWaveTest, OffTheNodeTheDriverPodStandsInForTheHost) {
  const DaemonSetLookup lookup = [](const std::string&, const std::string&) -> std::optional<Json> {
    return driver_daemonset("new");
  };
  PlanInputs in;
  in.node = node("n1", {{"nvidia.com/gpu.deploy.driver", "true"}});
  in.pods = {driver_pod("n1", "new")};
  infer_host_from_api(wave_settings(), in, lookup);
  EXPECT_FALSE(in.on_node);
  EXPECT_TRUE(in.nvidia_loaded);
  EXPECT_TRUE(in.skip.skip) << in.skip.summary;
  ASSERT_TRUE(in.own_pod);
  EXPECT_EQ(in.own_pod->ref, "gpu-operator/nvidia-driver-daemonset-n1");

  in.pods = {driver_pod("n1", "old")};
  in.own_pod.reset();
  infer_host_from_api(wave_settings(), in, lookup);
  EXPECT_FALSE(in.skip.skip);
  EXPECT_THAT(in.skip.summary, HasSubstr("differs from that of the template of DaemonSet"));
  // DRIVER_CONFIG_DIGEST wins over the DaemonSet's template.
  Settings given = wave_settings();
  given.driver_config_digest = "old";
  infer_host_from_api(given, in, lookup);
  EXPECT_TRUE(in.skip.skip) << in.skip.summary;
  // A driver pod not ready yet may not have installed: no skip.
  in.pods[0]["status"]["conditions"][0]["status"] = "False";
  infer_host_from_api(given, in, lookup);
  EXPECT_FALSE(in.skip.skip);
  EXPECT_THAT(in.skip.summary, HasSubstr("not ready"));

  in.pods.clear();
  in.own_pod.reset();
  infer_host_from_api(wave_settings(), in, lookup);
  EXPECT_FALSE(in.nvidia_loaded);
  EXPECT_THAT(in.host_note, HasSubstr("no driver pod"));
  EXPECT_EQ(build_plan(wave_settings(), in).flow.path, RunPath::kNoDriver);

  in.node = node("n1", {{"nvidia.com/gpu.deploy.driver", "pre-installed"}});
  infer_host_from_api(wave_settings(), in, lookup);
  EXPECT_TRUE(in.host_driver_version.has_value());
  EXPECT_EQ(build_plan(wave_settings(), in).flow.path, RunPath::kPreInstalled);
}

// The wave's inputs: n1 with a DRA GPU workload (its claim allocated by gpu.nvidia.com), n2 already on the
// DaemonSet's digest (skip), and a node the selector did not pick is not there at all.
WaveInputs dra_wave() {
  WaveInputs in;
  in.nodes = {node("n2", {{"nvidia.com/gpu.deploy.driver", "true"}}),
              node("n1", {{"nvidia.com/gpu.deploy.driver", "true"}})};
  Json trainer = fixture("dra-claim-pod");
  trainer["spec"]["nodeName"] = "n1";
  trainer["spec"]["terminationGracePeriodSeconds"] = 40;
  for (const Json& pod : {driver_pod("n1", "old"), driver_pod("n2", "new"), trainer}) in.pods.add(pod);
  in.shared.pdbs = std::vector<Json>{};
  in.shared.claims = std::vector<Json>{fixture("claim-gpu-allocated"), fixture("claim-computedomain")};
  in.daemonsets = std::make_shared<const std::vector<Json>>(std::vector<Json>{driver_daemonset("new")});
  in.cluster_policy_note = "no ClusterPolicy resource: the chart's defaults assumed";
  in.requests = 7;
  return in;
}

TEST(PlanWaveTest, DraClaimsInUseAreNamedAndTheirPodsEvicted) {
  const Wave w = build_wave(wave_settings(), WaveSelection{}, dra_wave());
  ASSERT_EQ(w.nodes.size(), 2U);
  const Plan& n1 = w.nodes[0];
  EXPECT_EQ(n1.node, "n1");
  EXPECT_EQ(n1.flow.path, RunPath::kFull);
  ASSERT_EQ(n1.dra_claims.size(), 1U);
  EXPECT_EQ(n1.dra_claims[0].claim, "ml/dra-trainer-gpu-x7k2p");
  EXPECT_EQ(n1.dra_claims[0].pod, "ml/dra-trainer");
  bool evicted = false;
  for (const auto& p : n1.pods)
    evicted = evicted || (p.pod == "ml/dra-trainer" && p.action == PodAction::kEvict);
  EXPECT_TRUE(evicted) << "a pod holding a GPU claim is a GPU workload";
  EXPECT_EQ(n1.estimate.longest_grace_seconds, 40);
  EXPECT_EQ(w.nodes[1].flow.path, RunPath::kSkip);
  EXPECT_EQ(w.summary.dra_claims, 1);
  const std::string text = render_wave_text(w);
  EXPECT_THAT(text, HasSubstr("ml/dra-trainer-gpu-x7k2p (held by ml/dra-trainer)"));
}

TEST(PlanWaveTest, TheSummaryAddsTheNodesUp) {
  WaveInputs in = dra_wave();
  // A budget that allows nothing over the DRA workload: n1 blocks.
  in.shared.pdbs = std::vector<Json>{{{"metadata", {{"namespace", "ml"}, {"name", "hold"}}},
                                      {"spec", {{"selector", Json::object()}}},
                                      {"status", {{"disruptionsAllowed", 0}}}}};
  const Wave w = build_wave(wave_settings(), WaveSelection{}, in);
  const WaveSummary& s = w.summary;
  EXPECT_EQ(s.nodes_by_path.at("full"), std::vector<std::string>{"n1"});
  EXPECT_EQ(s.nodes_by_path.at("skip"), std::vector<std::string>{"n2"});
  EXPECT_EQ(s.pods_by_category.at("gpu-workloads"), 1);
  ASSERT_EQ(s.blocking.size(), 1U);
  EXPECT_EQ(s.blocking[0].node, "n1");
  EXPECT_THAT(s.blocking[0].on[0], HasSubstr("PodDisruptionBudget ml/hold allows 0 disruption(s)"));
  // Defaults: one node at a time, n1 (40 s) then n2 (no pod goes).
  EXPECT_EQ(s.parallelism.nodes_at_once, 1);
  EXPECT_EQ(s.estimate.total, seconds(40) + 2 * kMeasuredOverhead);
  EXPECT_EQ(s.estimate.rounds, 2);
  EXPECT_THAT(s.estimate_note, HasSubstr("the 1 blocking node(s) take longer"));
}

TEST(PlanWaveTest, EachNodeOfTheJsonIsTheOneNodePlan) {
  const WaveInputs in = dra_wave();
  const Wave w = build_wave(wave_settings(), WaveSelection{}, in);
  const Json j = wave_to_json(w);
  ASSERT_EQ(j["nodes"].size(), 2U);
  for (size_t i = 0; i < w.nodes.size(); ++i) EXPECT_EQ(j["nodes"][i], plan_to_json(w.nodes[i]));
  EXPECT_EQ(j["selector"], "nvidia.com/gpu.deploy.driver=true");
  EXPECT_EQ(j["apiRequests"], 7);
  EXPECT_EQ(j["summary"]["nodes"], 2);
  EXPECT_EQ(j["summary"]["estimate"]["nodesAtOnce"], 1);
  EXPECT_EQ(j["summary"]["upgradePolicy"]["maxUnavailable"], "25%");
  for (const char* key :
       {"nodesByPath", "podsByStep", "blockingNodes", "clientsToleratingTaint", "draClaims"}) {
    EXPECT_TRUE(j["summary"].contains(key)) << key;
  }
  // The one-node plan of n1, decided from the same inputs, is that element.
  Settings s = wave_settings();
  s.node_name = "n1";
  std::vector<Json> pods;
  for (const auto& p : in.pods.all()) {
    if (p["spec"].value("nodeName", "") == "n1") pods.push_back(p);
  }
  EXPECT_EQ(plan_to_json(build_plan(s, node_plan_inputs(s, in, in.nodes[1], pods))), j["nodes"][0]);
}

// A wave frees each node's pods as it plans the node: taken, they are no longer kept or counted.
TEST(PlanWaveTest, ANodesPodsTakenAreNoLongerKept) {
  WavePods pods;
  Json b = fixture("dra-claim-pod");
  b["spec"]["nodeName"] = "n2";
  pods.add(driver_pod("n1", "old"));
  pods.add(b);
  const size_t both = pods.encoded_bytes();
  const auto taken = pods.take("n2");
  ASSERT_EQ(taken.size(), 1U);
  EXPECT_EQ(taken[0], b);
  EXPECT_EQ(pods.size(), 1U);
  EXPECT_LT(pods.encoded_bytes(), both);
  EXPECT_TRUE(pods.of("n2").empty());
  EXPECT_TRUE(pods.take("n2").empty());
  EXPECT_EQ(pods.of("n1").size(), 1U);
}

// The pods of a wave are kept encoded under their node and come back as they were added; a pod added
// again (a list started over) replaces the one kept.
TEST(PlanWaveTest, TheWavesPodsComeBackByNodeAsTheyWereAdded) {
  WavePods pods;
  const Json a = driver_pod("n1", "old");
  Json b = fixture("dra-claim-pod");
  b["spec"]["nodeName"] = "n2";
  pods.add(a);
  pods.add(b);
  EXPECT_EQ(pods.size(), 2U);
  EXPECT_GT(pods.encoded_bytes(), 0U);
  ASSERT_EQ(pods.of("n1").size(), 1U);
  EXPECT_EQ(pods.of("n1")[0], a);
  ASSERT_EQ(pods.of("n2").size(), 1U);
  EXPECT_EQ(pods.of("n2")[0], b);
  EXPECT_TRUE(pods.of("n3").empty());
  Json again = a;
  again["metadata"]["labels"]["seen"] = "twice";
  pods.add(again);
  EXPECT_EQ(pods.size(), 2U);
  ASSERT_EQ(pods.of("n1").size(), 1U);
  EXPECT_EQ(pods.of("n1")[0], again);
}

// The JSON document written a node at a time is the one dump(2) writes, with two nodes, with none.
TEST(PlanWaveTest, TheStreamedJsonIsTheWholeDocumentsDump) {
  const auto streamed = [](const Wave& w) {
    char* text = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&text, &size);
    write_wave_json(w, out);
    std::fclose(out);
    std::string s(text, size);
    std::free(text);  // NOLINT(cppcoreguidelines-no-malloc): open_memstream's buffer
    return s;
  };
  const Wave w = build_wave(wave_settings(), WaveSelection{}, dra_wave());
  ASSERT_EQ(w.nodes.size(), 2U);
  EXPECT_EQ(streamed(w), wave_to_json(w).dump(2) + "\n");
  WaveInputs none = dra_wave();
  none.nodes.clear();
  const Wave empty = build_wave(wave_settings(), WaveSelection{}, none);
  EXPECT_EQ(streamed(empty), wave_to_json(empty).dump(2) + "\n");
}

}  // namespace
}  // namespace dm::manager
