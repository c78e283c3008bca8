#include "manager/rules/pod_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "manager/rules/claims.h"
#include "support/process.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

Json fixture(const std::string& name) {
  return Json::parse(test::read_file(test::source_path("tests/fixtures/pods/" + name + ".json")));
}

std::vector<Json> fixtures(std::initializer_list<const char*> names) {
  std::vector<Json> out;
  for (const char* n : names) out.push_back(fixture(n));
  return out;
}

std::set<std::string> refs(const std::vector<Json>& pods) {
  std::set<std::string> out;
  for (const auto& p : pods) out.insert(kube::ref_string(p));
  return out;
}

const PodDecision& decision_for(const PodListDecision& plan, const std::string& ref) {
  for (const auto& d : plan.decisions) {
    if (d.pod == ref) return d;
  }
  throw std::runtime_error("no decision for " + ref);
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// A fake API: which DaemonSets exist, which claims exist; counts lookups.
struct FakeApi {
  std::set<std::string> daemonsets = {"monitoring/gpu-agent", "gpu-operator/nvidia-device-plugin-daemonset",
                                      "nvsentinel/health-agent", "monitoring/node-agent",
                                      "dra/gpu-dra-kubelet-plugin"};
  std::map<std::string, Json> claims;  // ns/name
  int ds_lookups = 0;
  int claim_lookups = 0;
  bool fail_ds = false;
  bool fail_claims = false;

  PodFacts facts() {
    PodFacts f;
    f.daemonset_exists = [this](const std::string& ns, const std::string& name) -> Result<bool> {
      ++ds_lookups;
      if (fail_ds) return Error("daemonsets.apps \"" + name + "\" is forbidden", 403, "Forbidden");
      return daemonsets.count(ns + "/" + name) > 0;
    };
    f.holds_gpu_claim = [this](const Json& pod) -> Result<bool> {
      ++claim_lookups;
      if (fail_claims) return Error("resourceclaims: connection refused");
      const std::string ns = pod["metadata"]["namespace"].get<std::string>();
      for (const auto& name : claim_names(pod)) {
        std::string ref = ns;
        ref.append("/").append(name);
        auto it = claims.find(ref);
        if (it != claims.end() && is_allocated_gpu_claim(it->second)) return true;
      }
      return false;
    };
    return f;
  }
};

TEST(PodRulesTest, GoBoolSyntax) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) EXPECT_EQ(parse_go_bool(t), true) << t;
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) EXPECT_EQ(parse_go_bool(f), false) << f;
  for (const char* bad : {"", "yes", "no", "tRUE", " true", "true ", "2", "on"}) {
    EXPECT_EQ(parse_go_bool(bad), std::nullopt) << bad;
  }
}

TEST(PodRulesTest, GpuResourceDetectionUsesRegularContainersOnly) {
  EXPECT_TRUE(kube::pod_declares_gpu_resource(fixture("gpu-deployment-pod")));  // limits nvidia.com/gpu
  EXPECT_TRUE(kube::pod_declares_gpu_resource(fixture("gpu-shared-pod")));  // requests nvidia.com/gpu.shared
  EXPECT_TRUE(kube::pod_declares_gpu_resource(fixture("mig-pod")));         // nvidia.com/mig-1g.5gb
  EXPECT_FALSE(kube::pod_declares_gpu_resource(fixture("gpu-init-only-pod")));  // init container only
  EXPECT_FALSE(kube::pod_declares_gpu_resource(fixture("vgpu-pod")));           // vGPU resource name
  EXPECT_FALSE(kube::pod_declares_gpu_resource(fixture("cpu-pod")));
  EXPECT_FALSE(kube::pod_declares_gpu_resource(fixture("dra-claim-pod")));  // claim, not a resource
}

// The shared pod model (kube/objects.h) on the realistic pod fixtures the rules are tested with.
TEST(PodRulesTest, PodFacts) {
  EXPECT_EQ(kube::ref_string(fixture("gpu-deployment-pod")), "ml/trainer-7d9c");
  EXPECT_EQ(kube::uid(fixture("gpu-deployment-pod")), "uid-trainer-7d9c");
  EXPECT_TRUE(kube::pod_finished(fixture("gpu-succeeded-bare-pod")));
  EXPECT_FALSE(kube::pod_finished(fixture("gpu-bare-pod")));
  EXPECT_TRUE(kube::terminating(fixture("client-terminating-pod")));
  EXPECT_FALSE(kube::terminating(fixture("client-deployment-pod")));
  EXPECT_TRUE(kube::pod_is_mirror(fixture("gpu-mirror-pod")));
  EXPECT_FALSE(kube::pod_is_mirror(fixture("gpu-bare-pod")));
  EXPECT_TRUE(kube::pod_has_emptydir_volume(fixture("gpu-emptydir-pod")));
  EXPECT_FALSE(kube::pod_has_emptydir_volume(fixture("gpu-deployment-pod")));
  EXPECT_EQ(kube::controller_ref(fixture("gpu-bare-pod")), std::nullopt);
  ASSERT_NE(kube::controller_ref(fixture("gpu-daemonset-pod")), std::nullopt);
  EXPECT_TRUE(kube::controlled_by_kind(fixture("gpu-daemonset-pod"), "DaemonSet"));
  EXPECT_FALSE(kube::controlled_by_kind(fixture("gpu-deployment-pod"), "DaemonSet"));
  // An ownerReference that is not the controller does not count.
  Json p = fixture("gpu-deployment-pod");
  p["metadata"]["ownerReferences"][0]["controller"] = false;
  EXPECT_EQ(kube::controller_ref(p), std::nullopt);
}

// The node labelled for the client and custom DaemonSets, before and after the run pauses both keys.
std::shared_ptr<const LabelPause> client_and_custom_pause() {
  auto p = std::make_shared<LabelPause>();
  p->before = {"gpu-node-1", {{"nvidia.com/gpu.deploy.client", "true"}, {"example.com/gpu-agent", "on"}}};
  p->after = p->before;
  p->after.labels["nvidia.com/gpu.deploy.client"] = "paused-for-driver-upgrade";
  p->after.labels["example.com/gpu-agent"] = "on_paused-for-driver-upgrade";
  p->keys = {"nvidia.com/gpu.deploy.client", "example.com/gpu-agent"};
  return p;
}

TEST(PodRulesTest, DaemonSetPodsTakenOffByThePause) {
  const auto pods = fixtures({"client-ds-pod", "client-selector-rs-pod", "custom-ds-pod", "operand-ds-pod",
                              "cpu-pod", "client-labelled-ds-pod"});
  const auto pause = client_and_custom_pause();
  const auto with_key = [&](std::string_view key) {
    std::vector<Json> out;
    for (const auto& p : pods) {
      if (taken_off_by_pause(p, *pause, key)) out.push_back(p);
    }
    return out;
  };
  // DaemonSet pods only: the ReplicaSet pod selecting the same key is not removed by its controller.
  EXPECT_EQ(refs(with_key("nvidia.com/gpu.deploy.client")),
            (std::set<std::string>{"nvsentinel/health-agent-q2", "nvsentinel/health-agent-annotated"}));
  EXPECT_EQ(refs(with_key("example.com/gpu-agent")), (std::set<std::string>{"dra/dra-plugin-z9"}));
  EXPECT_EQ(taken_off_by_pause(fixture("client-ds-pod"), *pause)->describe(),
            "nodeSelector key nvidia.com/gpu.deploy.client");
  // A pod the pause does not take off is not the label's: it selects a value the pause leaves alone, or a
  // value the node did not have in the first place.
  Json p = fixture("client-ds-pod");
  p["spec"]["nodeSelector"]["nvidia.com/gpu.deploy.client"] = "false";
  EXPECT_FALSE(taken_off_by_pause(p, *pause));
  auto unpaused = std::make_shared<LabelPause>(*pause);
  unpaused->before.labels["nvidia.com/gpu.deploy.client"] = "false";
  unpaused->after.labels["nvidia.com/gpu.deploy.client"] = "false";
  EXPECT_FALSE(taken_off_by_pause(p, *unpaused));
  p["spec"]["nodeSelector"]["nvidia.com/gpu.deploy.client"] = "paused-for-driver-upgrade";
  EXPECT_FALSE(taken_off_by_pause(p, *pause)) << "it never fit the node as the operator labelled it";
}

// NVSentinel's shape: two terms, "In [true]" or "DoesNotExist", in its DaemonSet's template. The DaemonSet
// controller replaces the pod's required node affinity by one term pinning it to its node (matchFields), so
// the rule reads the template: pausing the label matches neither of its terms.
TEST(PodRulesTest, DaemonSetPodTakenOffThroughItsTemplatesNodeAffinity) {
  Json p = fixture("client-ds-pod");
  p["spec"].erase("nodeSelector");
  const Json pinned = Json::parse(R"({"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-1"]}]}]})");
  p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = pinned;
  Json tmpl = {{"metadata", p["metadata"]}, {"spec", p["spec"]}};
  tmpl["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      ["nodeSelectorTerms"] = Json::parse(R"([
        {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client", "operator": "In", "values": ["true"]}]},
        {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.client", "operator": "DoesNotExist"}]}])");
  const std::string ds = kube::namespace_of(p) + "/" + kube::controller_ref(p)->name;
  auto pause = std::make_shared<LabelPause>(*client_and_custom_pause());
  // The pod's own spec names no key: without its DaemonSet's template it is not the pause's.
  EXPECT_FALSE(taken_off_by_pause(p, *pause));
  pause->daemonset_templates[ds] = tmpl;
  const auto t = taken_off_by_pause(p, *pause);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->rule, PlacementRule::kNodeAffinity);
  EXPECT_EQ(t->describe(), "node affinity on nvidia.com/gpu.deploy.client");
  // The same pod on a node without the label (the second term) is not taken off: no key is paused there.
  auto bare = std::make_shared<LabelPause>(*pause);
  bare->before.labels.erase("nvidia.com/gpu.deploy.client");
  bare->after.labels.erase("nvidia.com/gpu.deploy.client");
  EXPECT_FALSE(taken_off_by_pause(p, *bare));
  // Another DaemonSet's template is not this pod's.
  auto other = std::make_shared<LabelPause>(*client_and_custom_pause());
  other->daemonset_templates[ds + "-other"] = tmpl;
  EXPECT_FALSE(taken_off_by_pause(p, *other));

  GpuClientOptions o;
  o.label_pause = pause;
  Json annotated = p;
  annotated["metadata"]["annotations"]["nvidia.com/gpu.client"] = "true";
  const PodDecision d = gpu_client_pipeline(o).decide(annotated);
  EXPECT_EQ(d.verdict, Verdict::kSkip);
  EXPECT_EQ(d.filter, "node-label");
  EXPECT_THAT(d.reason,
              ::testing::HasSubstr("selecting node label nvidia.com/gpu.deploy.client through its node "
                                   "affinity"));
}

// The templates are read once per DaemonSet of the node's running pods, through the facts' lookup.
TEST(PodRulesTest, DaemonSetTemplatesAreReadOncePerDaemonSetOfTheNodesPods) {
  const auto pods = fixtures({"client-ds-pod", "client-ds-pod", "cpu-pod", "gpu-succeeded-bare-pod"});
  std::vector<std::string> asked;
  PodFacts facts;
  facts.daemonset_template = [&](const std::string& ns, const std::string& name) -> std::optional<Json> {
    asked.push_back(ns + "/" + name);
    return Json{{"spec", {{"nodeSelector", {{"a", "b"}}}}}};
  };
  const DaemonSetTemplates got = daemonset_templates_of(pods, facts);
  const Json& pod = pods.front();
  const std::string ds = kube::namespace_of(pod) + "/" + kube::controller_ref(pod)->name;
  EXPECT_EQ(asked, std::vector<std::string>{ds});
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got.at(ds)["spec"]["nodeSelector"]["a"], "b");
  facts.daemonset_template = [](const std::string&, const std::string&) -> std::optional<Json> {
    return std::nullopt;
  };
  EXPECT_TRUE(daemonset_templates_of(pods, facts).empty()) << "a DaemonSet that may not be read is left out";
  EXPECT_TRUE(daemonset_templates_of(pods, PodFacts{}).empty());
}

TEST(PodRulesTest, GpuClientDesignation) {
  EXPECT_EQ(gpu_client_designation(fixture("client-deployment-pod")), ClientDesignation::kClient);
  EXPECT_EQ(gpu_client_designation(fixture("client-statefulset-pod")), ClientDesignation::kClient);  // "True"
  EXPECT_EQ(gpu_client_designation(fixture("client-bare-pod")), ClientDesignation::kClient);         // "1"
  EXPECT_EQ(gpu_client_designation(fixture("client-optout-pod")), ClientDesignation::kOptOut);
  EXPECT_EQ(gpu_client_designation(fixture("client-invalid-pod")), ClientDesignation::kInvalid);  // "yes"
  EXPECT_EQ(gpu_client_designation(fixture("cpu-pod")), ClientDesignation::kNone);
  EXPECT_TRUE(is_dra_plugin_client(fixture("client-dra-plugin-pod")));
  EXPECT_TRUE(is_dra_plugin_client(fixture("client-dra-plugin-only-pod")));
  EXPECT_FALSE(is_dra_plugin_client(fixture("client-deployment-pod")));
}

TEST(PodRulesTest, DaemonSetFilter) {
  FakeApi api;
  const Json ds_pod = fixture("gpu-daemonset-pod");
  auto ignore = daemonset_filter(DaemonSetPods::kIgnore, DrainOptions{}, api.facts());
  EXPECT_EQ(ignore.name, "daemonset");
  FilterResult r = ignore.apply(ds_pod);
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_TRUE(contains(r.reason, "ignoring DaemonSet-managed Pods")) << r.reason;
  EXPECT_EQ(api.ds_lookups, 1);

  r = daemonset_filter(DaemonSetPods::kRefuse, DrainOptions{}, api.facts()).apply(ds_pod);
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_TRUE(contains(r.reason, "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"));

  // Not a DaemonSet pod, or a finished one: passes without a lookup.
  api.ds_lookups = 0;
  EXPECT_EQ(ignore.apply(fixture("gpu-deployment-pod")).verdict, Verdict::kDelete);
  Json finished = ds_pod;
  finished["status"]["phase"] = "Failed";
  EXPECT_EQ(ignore.apply(finished).verdict, Verdict::kDelete);
  EXPECT_EQ(api.ds_lookups, 0);

  // Orphaned DaemonSet pod: error, or delete with a warning under force.
  api.daemonsets.clear();
  r = ignore.apply(ds_pod);
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_TRUE(contains(r.reason, "monitoring/gpu-agent is gone")) << r.reason;
  EXPECT_TRUE(contains(r.reason, "DRAIN_USE_FORCE=true"));
  r = daemonset_filter(DaemonSetPods::kIgnore, DrainOptions{.force = true}, api.facts()).apply(ds_pod);
  EXPECT_EQ(r.verdict, Verdict::kDelete);
  EXPECT_TRUE(contains(r.reason, "orphaned")) << r.reason;

  // Lookup failure: error naming the DaemonSet and the API error.
  api.fail_ds = true;
  r = ignore.apply(ds_pod);
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_TRUE(contains(r.reason, "monitoring/gpu-agent")) << r.reason;
  EXPECT_TRUE(contains(r.reason, "forbidden")) << r.reason;

  // Without an injected lookup the DaemonSet is assumed to exist.
  EXPECT_EQ(daemonset_filter(DaemonSetPods::kIgnore, DrainOptions{}, PodFacts{}).apply(ds_pod).verdict,
            Verdict::kSkip);
}

TEST(PodRulesTest, MirrorEmptyDirControllerFilters) {
  const Json mirror = fixture("gpu-mirror-pod");
  EXPECT_EQ(mirror_filter(Verdict::kSkip).apply(mirror).verdict, Verdict::kSkip);
  const FilterResult refused = mirror_filter(Verdict::kError).apply(mirror);
  EXPECT_EQ(refused.verdict, Verdict::kError);
  EXPECT_TRUE(contains(refused.reason, "static (mirror) pod")) << refused.reason;
  EXPECT_EQ(mirror_filter(Verdict::kSkip).apply(fixture("gpu-bare-pod")).verdict, Verdict::kDelete);

  const Json ed = fixture("gpu-emptydir-pod");
  FilterResult r = emptydir_filter(DrainOptions{}).apply(ed);
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_TRUE(contains(r.reason, "DRAIN_DELETE_EMPTYDIR_DATA=true")) << r.reason;
  r = emptydir_filter(DrainOptions{.delete_emptydir_data = true}).apply(ed);
  EXPECT_EQ(r.verdict, Verdict::kDelete);
  EXPECT_FALSE(r.reason.empty());  // a warning
  EXPECT_EQ(emptydir_filter(DrainOptions{}).apply(fixture("gpu-succeeded-bare-pod")).verdict,
            Verdict::kDelete);

  const Json bare = fixture("gpu-bare-pod");
  r = controller_filter(DrainOptions{}).apply(bare);
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_TRUE(contains(r.reason, "DRAIN_USE_FORCE=true")) << r.reason;
  r = controller_filter(DrainOptions{.force = true}).apply(bare);
  EXPECT_EQ(r.verdict, Verdict::kDelete);
  EXPECT_FALSE(r.reason.empty());
  EXPECT_EQ(controller_filter(DrainOptions{}).apply(fixture("gpu-succeeded-bare-pod")).verdict,
            Verdict::kDelete);
  EXPECT_EQ(controller_filter(DrainOptions{}).apply(fixture("gpu-deployment-pod")).verdict, Verdict::kDelete);
}

TEST(PodRulesTest, GpuFilterAndClaims) {
  FakeApi api;
  api.claims["ml/dra-trainer-gpu-x7k2p"] = fixture("claim-gpu-allocated");
  auto f = gpu_filter(api.facts());
  EXPECT_EQ(f.apply(fixture("gpu-deployment-pod")).verdict, Verdict::kDelete);
  EXPECT_EQ(api.claim_lookups, 0);  // resources decide first
  EXPECT_EQ(f.apply(fixture("dra-claim-pod")).verdict, Verdict::kDelete);
  EXPECT_EQ(f.apply(fixture("cpu-pod")).verdict, Verdict::kSkip);
  api.claims.clear();
  EXPECT_EQ(f.apply(fixture("dra-claim-pod")).verdict, Verdict::kSkip);
  api.fail_claims = true;
  const FilterResult r = f.apply(fixture("dra-claim-pod"));
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_TRUE(contains(r.reason, "connection refused"));
  EXPECT_EQ(gpu_filter(PodFacts{}).apply(fixture("dra-claim-pod")).verdict, Verdict::kSkip);
}

TEST(PodRulesTest, SelectorTerminalTerminatingFilters) {
  auto sel = selector_filter(*LabelSelector::parse("app=web"));
  EXPECT_EQ(sel.apply(fixture("cpu-pod")).verdict, Verdict::kDelete);
  const FilterResult r = sel.apply(fixture("gpu-deployment-pod"));
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_TRUE(contains(r.reason, "app=web"));
  EXPECT_EQ(selector_filter(LabelSelector()).apply(fixture("gpu-bare-pod")).verdict, Verdict::kDelete);
  EXPECT_EQ(terminal_skip_filter().apply(fixture("gpu-succeeded-bare-pod")).verdict, Verdict::kSkip);
  EXPECT_EQ(terminal_skip_filter().apply(fixture("gpu-bare-pod")).verdict, Verdict::kDelete);
  EXPECT_EQ(terminating_wait_filter().apply(fixture("client-terminating-pod")).verdict, Verdict::kWaitOnly);
  EXPECT_EQ(terminating_wait_filter().apply(fixture("client-deployment-pod")).verdict, Verdict::kDelete);
}

TEST(PodRulesTest, PipelineFirstNonDeleteWinsAndKeepsWarnings) {
  PodPipeline p("test",
                {{"warn",
                  [](const Json&) {
                    return FilterResult{Verdict::kDelete, "careful"};
                  }},
                 {"stop",
                  [](const Json&) {
                    return FilterResult{Verdict::kSkip, "not today"};
                  }},
                 {"never",
                  [](const Json&) {
                    return FilterResult{Verdict::kError, "unreachable"};
                  }}},
                "fine");
  const PodDecision d = p.decide(fixture("cpu-pod"));
  EXPECT_EQ(d.verdict, Verdict::kSkip);
  EXPECT_EQ(d.filter, "stop");
  EXPECT_EQ(d.reason, "not today");
  EXPECT_EQ(d.warnings, std::vector<std::string>{"careful"});
  EXPECT_EQ(d.log_line(), "default/web-1: skip [stop]: not today; warning: careful");

  const PodDecision ok = PodPipeline("x", {}, "fine").decide(fixture("cpu-pod"));
  EXPECT_EQ(ok.verdict, Verdict::kDelete);
  EXPECT_EQ(ok.log_line(), "default/web-1: evict: fine");
}

TEST(PodRulesTest, GpuWorkloadEvictionTakesEveryGpuPod) {
  FakeApi api;
  api.claims["ml/dra-trainer-gpu-x7k2p"] = fixture("claim-gpu-allocated");
  const auto pods =
      fixtures({"gpu-deployment-pod", "gpu-shared-pod", "mig-pod", "dra-claim-pod", "cpu-pod", "cpu-bare-pod",
                "operand-ds-pod", "client-ds-pod", "gpu-init-only-pod", "vgpu-pod"});
  auto plan = decide_gpu_workload_eviction(pods, DrainOptions{}, api.facts());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->gpu_pods, 4U);
  EXPECT_TRUE(plan->pods.ok()) << plan->pods.errors.front();
  EXPECT_EQ(refs(plan->pods.to_evict),
            (std::set<std::string>{"ml/trainer-7d9c", "ml/shared-1", "ml/mig-1", "ml/dra-trainer"}));
  EXPECT_EQ(plan->pods.decisions.size(), pods.size());
  // A bare non-GPU pod does not block GPU eviction (upstream compares GPU pods only).
  EXPECT_EQ(decision_for(plan->pods, "default/scratch").verdict, Verdict::kSkip);
  // Non-GPU DaemonSet pods are not looked up; one claim lookup per pod without GPU resources.
  EXPECT_EQ(api.ds_lookups, 0);
  EXPECT_EQ(api.claim_lookups, 7);
  EXPECT_EQ(decision_for(plan->pods, "ml/trainer-7d9c").log_line(), "ml/trainer-7d9c: evict: GPU pod");
}

TEST(PodRulesTest, GpuWorkloadEvictionEqualityRule) {
  FakeApi api;
  // Each of these GPU pods cannot be evicted without options: the whole eviction fails.
  for (const char* blocker : {"gpu-daemonset-pod", "gpu-mirror-pod", "gpu-bare-pod", "gpu-emptydir-pod"}) {
    const auto pods = fixtures({"gpu-deployment-pod", blocker});
    auto plan = decide_gpu_workload_eviction(pods, DrainOptions{}, api.facts());
    ASSERT_TRUE(plan);
    EXPECT_EQ(plan->gpu_pods, 2U);
    ASSERT_EQ(plan->pods.errors.size(), 1U) << blocker;
    EXPECT_TRUE(contains(plan->pods.errors[0], "GPU pod cannot be evicted")) << plan->pods.errors[0];
    EXPECT_TRUE(contains(plan->pods.errors[0], kube::ref_string(pods[1]))) << plan->pods.errors[0];
  }
  // With force / emptyDir allowed, bare and emptyDir GPU pods go; DaemonSet and static ones never do.
  const auto pods = fixtures({"gpu-bare-pod", "gpu-emptydir-pod", "gpu-succeeded-bare-pod"});
  auto plan = decide_gpu_workload_eviction(pods, DrainOptions{true, true}, api.facts());
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->pods.ok());
  EXPECT_EQ(plan->pods.to_evict.size(), 3U);
  auto ds =
      decide_gpu_workload_eviction(fixtures({"gpu-daemonset-pod"}), DrainOptions{true, true}, api.facts());
  ASSERT_TRUE(ds);
  EXPECT_FALSE(ds->pods.ok());
  // A finished bare GPU pod passes the filters even without force (kubectl semantics).
  auto done = decide_gpu_workload_eviction(fixtures({"gpu-succeeded-bare-pod"}), DrainOptions{}, api.facts());
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->pods.ok());
}

TEST(PodRulesTest, GpuWorkloadEvictionWithoutGpuPodsAndClaimErrors) {
  FakeApi api;
  auto none =
      decide_gpu_workload_eviction(fixtures({"cpu-pod", "operand-ds-pod"}), DrainOptions{}, api.facts());
  ASSERT_TRUE(none);
  EXPECT_EQ(none->gpu_pods, 0U);
  EXPECT_TRUE(none->pods.to_evict.empty());
  EXPECT_TRUE(none->pods.ok());

  api.fail_claims = true;
  auto err = decide_gpu_workload_eviction(fixtures({"cpu-pod"}), DrainOptions{}, api.facts());
  ASSERT_FALSE(err);
  EXPECT_TRUE(contains(err.error().message, "default/web-1")) << err.error().message;
  EXPECT_TRUE(contains(err.error().message, "connection refused"));
}

TEST(PodRulesTest, FullDrainIgnoresDaemonSetsAndHonoursSelector) {
  FakeApi api;
  const auto pods = fixtures({"gpu-deployment-pod", "cpu-pod", "operand-ds-pod", "gpu-daemonset-pod",
                              "gpu-mirror-pod", "gpu-succeeded-bare-pod"});
  PodListDecision plan = decide_pods(full_drain_pipeline(DrainOptions{}, LabelSelector(), api.facts()), pods);
  EXPECT_TRUE(plan.ok());
  EXPECT_EQ(refs(plan.to_evict), (std::set<std::string>{"ml/trainer-7d9c", "default/web-1", "ml/done-gpu"}));
  EXPECT_EQ(decision_for(plan, "gpu-operator/nvidia-device-plugin-daemonset-abcde").filter, "daemonset");
  EXPECT_EQ(decision_for(plan, "kube-system/static-gpu-gpu-node-1").filter, "mirror");

  // Bare pods refuse the drain without force.
  PodListDecision refused = decide_pods(full_drain_pipeline(DrainOptions{}, LabelSelector(), api.facts()),
                                        fixtures({"cpu-bare-pod", "cpu-pod"}));
  ASSERT_EQ(refused.errors.size(), 1U);
  EXPECT_TRUE(contains(refused.errors[0], "default/scratch: cannot delete Pods that declare no controller"));

  // The pod selector limits the drain (and the bare pod that does not match no longer blocks it).
  PodListDecision selected =
      decide_pods(full_drain_pipeline(DrainOptions{}, *LabelSelector::parse("app=web"), api.facts()),
                  fixtures({"cpu-bare-pod", "cpu-pod", "gpu-deployment-pod"}));
  EXPECT_TRUE(selected.ok());
  EXPECT_EQ(refs(selected.to_evict), std::set<std::string>{"default/web-1"});
}

TEST(PodRulesTest, GpuClientPipelineWithOperands) {
  GpuClientOptions o;
  o.taint = *parse_taint(kDefaultGpuClientTaint);
  o.label_pause = client_and_custom_pause();
  const auto pods =
      fixtures({"client-deployment-pod", "client-statefulset-pod", "client-optout-pod", "client-invalid-pod",
                "client-bare-pod", "client-mirror-pod", "client-tolerating-ds-pod", "client-labelled-ds-pod",
                "client-dra-plugin-pod", "client-dra-plugin-only-pod", "client-terminating-pod",
                "client-succeeded-pod", "cpu-pod", "client-ds-pod"});
  const PodListDecision plan = decide_pods(gpu_client_pipeline(o), pods);
  EXPECT_EQ(refs(plan.to_evict), (std::set<std::string>{"monitoring/exporter-5f6", "monitoring/collector-0",
                                                        "monitoring/node-agent-k3"}));
  EXPECT_EQ(refs(plan.to_wait), std::set<std::string>{"monitoring/exporter-old"});
  ASSERT_EQ(plan.errors.size(), 2U);
  EXPECT_TRUE(contains(plan.errors[0], "monitoring/debug-shell: has no controller")) << plan.errors[0];
  EXPECT_TRUE(contains(plan.errors[0], "DRAIN_USE_FORCE=true"));
  EXPECT_TRUE(contains(plan.errors[1], "kube-system/static-agent-gpu-node-1: static (mirror) pod"))
      << plan.errors[1];

  auto reason = [&](const char* ref) { return decision_for(plan, ref).reason; };
  EXPECT_TRUE(contains(reason("monitoring/exporter-optout"), "opted out"));
  EXPECT_TRUE(contains(reason("monitoring/exporter-yes"), "\"yes\" is not a boolean"));
  EXPECT_TRUE(contains(reason("monitoring/exporter-yes"), "accepted: true, false"));
  // A malformed annotation is something to fix (a warning); a pod that is nobody's client is debug noise.
  EXPECT_EQ(decision_for(plan, "monitoring/exporter-yes").notice, Notice::kWarning);
  EXPECT_EQ(decision_for(plan, "default/web-1").notice, Notice::kQuiet);
  EXPECT_EQ(decision_for(plan, "monitoring/exporter-optout").notice, Notice::kNormal);
  EXPECT_TRUE(contains(reason("nvsentinel/health-agent-annotated"), "nvidia.com/gpu.deploy.client"));
  EXPECT_TRUE(contains(reason("dra/gpu-dra-kubelet-plugin-m4"), "after the GPU workloads"));
  EXPECT_TRUE(contains(reason("dra/dra-no-client"), "without nvidia.com/gpu.client"));
  EXPECT_TRUE(contains(reason("monitoring/client-job-1"), "already finished"));
  EXPECT_EQ(reason("default/web-1"), "not a designated GPU client");
  EXPECT_EQ(decision_for(plan, "nvsentinel/health-agent-q2").filter, "designation");

  // The tolerating DaemonSet pod is evicted, with a warning naming its controller and the label design.
  const PodDecision& tol = decision_for(plan, "monitoring/node-agent-k3");
  ASSERT_EQ(tol.warnings.size(), 1U);
  EXPECT_TRUE(contains(tol.warnings[0], "DaemonSet/node-agent")) << tol.warnings[0];
  EXPECT_TRUE(contains(tol.warnings[0], "nvidia.com/gpu.deploy.client"));
  EXPECT_TRUE(decision_for(plan, "monitoring/exporter-5f6").warnings.empty());
}

TEST(PodRulesTest, GpuClientPipelineForceAndLabelKeysAndNoTaint) {
  GpuClientOptions o;
  o.force = true;
  const PodListDecision plan =
      decide_pods(gpu_client_pipeline(o),
                  fixtures({"client-bare-pod", "client-labelled-ds-pod", "client-tolerating-ds-pod"}));
  EXPECT_TRUE(plan.ok());
  // Without a paused client label the annotated DaemonSet pod is evicted like any other client.
  EXPECT_EQ(refs(plan.to_evict),
            (std::set<std::string>{"monitoring/debug-shell", "nvsentinel/health-agent-annotated",
                                   "monitoring/node-agent-k3"}));
  EXPECT_EQ(decision_for(plan, "monitoring/debug-shell").warnings.size(), 1U);
  EXPECT_TRUE(decision_for(plan, "monitoring/node-agent-k3").warnings.empty());  // no taint configured
}

TEST(PodRulesTest, GpuClientPipelineDraPluginPhase) {
  GpuClientOptions o;
  o.phase = GpuClientPhase::kDraPlugin;
  const PodListDecision plan =
      decide_pods(gpu_client_pipeline(o),
                  fixtures({"client-dra-plugin-pod", "client-deployment-pod", "client-dra-plugin-only-pod"}));
  EXPECT_EQ(refs(plan.to_evict), std::set<std::string>{"dra/gpu-dra-kubelet-plugin-m4"});
  EXPECT_TRUE(contains(decision_for(plan, "monitoring/exporter-5f6").reason, "reset with the operands"));
  EXPECT_EQ(decision_for(plan, "dra/dra-no-client").filter, "designation");
}

// Every pod fixture with the heavy fields a pod from the API server carries and no rule reads (status of
// containers, init containers, env, mounts, probes, affinity, the token volume), taken from a real-shaped
// pod.
std::vector<Json> fixtures_as_served() {
  const Json donor = fixture("api-server-gpu-pod");
  Json extra = donor["spec"]["containers"][0];
  for (const char* keep : {"name", "image", "resources"}) extra.erase(keep);
  std::vector<Json> out;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path("tests/fixtures/pods"))) {
    Json pod = Json::parse(test::read_file(entry.path().string()));
    if (pod.value("kind", "") != "Pod") continue;
    Json& spec = pod["spec"];
    for (auto& c : spec["containers"]) c.update(extra);
    spec["volumes"].push_back(donor["spec"]["volumes"][1]);
    for (const char* key : {"affinity", "initContainers", "securityContext", "dnsPolicy", "schedulerName",
                            "serviceAccount", "enableServiceLinks", "preemptionPolicy"}) {
      if (!spec.contains(key)) spec[key] = donor["spec"][key];
    }
    Json& status = pod["status"];
    for (const char* key : {"containerStatuses", "initContainerStatuses", "hostIP", "hostIPs", "podIP",
                            "podIPs", "startTime", "qosClass"}) {
      status[key] = donor["status"][key];
    }
    for (auto& c : status["conditions"]) {
      c["lastProbeTime"] = nullptr;
      c["lastTransitionTime"] = "2026-11-30T08:12:58Z";
    }
    out.push_back(std::move(pod));
  }
  return out;
}

std::string render(const PodListDecision& plan) {
  std::string out;
  for (const auto& d : plan.decisions) out += d.log_line() + "\n";
  for (const auto& e : plan.errors) out += "error: " + e + "\n";
  for (const auto& p : plan.to_evict) out += "evict " + kube::ref_string(p) + "\n";
  for (const auto& p : plan.to_wait) out += "wait " + kube::ref_string(p) + "\n";
  return out;
}

// Every plan the flow makes, over one pod list.
std::string all_plans(const std::vector<Json>& pods) {
  FakeApi api;
  api.claims["ml/dra-trainer-gpu-x7k2p"] = fixture("claim-gpu-allocated");
  std::string out;
  for (const DrainOptions& o : {DrainOptions{}, DrainOptions{true, true}}) {
    out += "full drain\n" + render(decide_pods(full_drain_pipeline(o, LabelSelector(), api.facts()), pods));
    auto gpu = decide_gpu_workload_eviction(pods, o, api.facts());
    out += "gpu workloads\n" +
           (gpu ? std::to_string(gpu->gpu_pods) + "\n" + render(gpu->pods) : gpu.error().message);
  }
  GpuClientOptions c;
  c.taint = *parse_taint(kDefaultGpuClientTaint);
  c.label_pause = client_and_custom_pause();
  out += "clients\n" + render(decide_pods(gpu_client_pipeline(c), pods));
  c.force = true;
  c.phase = GpuClientPhase::kDraPlugin;
  out += "dra clients\n" + render(decide_pods(gpu_client_pipeline(c), pods));
  return out;
}

// The pod watch keeps pods without the fields no rule reads (kube::drop_unread_pod_fields): every plan over
// such pods is the plan over the pods as the API server sends them.
TEST(PodRulesTest, PlansAreTheSameOnPodsWithoutUnreadFields) {
  const std::vector<Json> served = fixtures_as_served();
  ASSERT_GT(served.size(), 20U);
  std::vector<Json> pruned = served;
  for (auto& p : pruned) kube::drop_unread_pod_fields(p);
  ASSERT_NE(pruned.front(), served.front());
  const std::string plans = all_plans(served);
  EXPECT_EQ(all_plans(pruned), plans);
  // The plans are not trivial: they evict, refuse and wait.
  EXPECT_TRUE(contains(plans, "evict ml/trainer-7d9c")) << plans;
  EXPECT_TRUE(contains(plans, "error: ")) << plans;
  EXPECT_TRUE(contains(plans, "wait monitoring/exporter-old")) << plans;
}

}  // namespace
}  // namespace dm::manager
