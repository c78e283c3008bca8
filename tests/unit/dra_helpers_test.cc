// The DRA driver's helper pods (manager/rules/dra_helpers): recognised from their own objects as the DRA
// driver's templates shape them, never evicted by any pipeline, what keeps one, the odd shapes, and what
// `plan` says of them (its text compared with tests/fixtures/plan/dra-helpers.txt).
#include "manager/rules/dra_helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kube/objects.h"
#include "manager/plan/build.h"
#include "manager/plan/infer.h"
#include "manager/plan/render.h"
#include "manager/rules/pod_rules.h"
#include "support/golden.h"

namespace dm::manager {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kDomain = "6f1c2e0a-3b1d-4c55-9a1e-0d3c2b1a4f5e";
const std::string kClaimUid = "0b7d6c5e-1a2b-4c3d-8e9f-112233445566";
const std::string kMpsApp = "mps-control-daemon-" + kClaimUid + "-4f2a1";

Json owned_pod(const std::string& ns, const std::string& name, const std::string& kind,
               const std::string& owner, const Json& labels, const std::string& container = "c") {
  return {{"metadata",
           {{"namespace", ns},
            {"name", name},
            {"uid", "uid-" + name},
            {"labels", labels},
            {"ownerReferences", Json::array({{{"kind", kind}, {"name", owner}, {"controller", true}}})}}},
          {"spec", {{"nodeName", "n1"}, {"containers", Json::array({{{"name", container}}})}}},
          {"status", {{"phase", "Running"}}}};
}

// As the ComputeDomain controller's template makes it: a pod of DaemonSet computedomain-daemon-<uid>,
// labelled with the domain, holding the daemon claim (compute-domain.nvidia.com).
Json cd_daemon() {
  Json p = owned_pod("nvidia-dra-driver", "computedomain-daemon-" + kDomain + "-x7k2p", "DaemonSet",
                     "computedomain-daemon-" + kDomain, {{std::string(kComputeDomainLabel), kDomain}},
                     "compute-domain-daemon");
  p["spec"]["resourceClaims"] = Json::array(
      {{{"name", "compute-domain-daemon"}, {"resourceClaimTemplateName", "cd-daemon-claim-template"}}});
  p["spec"]["tolerations"] = Json::array({{{"operator", "Exists"}, {"effect", "NoSchedule"}},
                                          {{"operator", "Exists"}, {"effect", "NoExecute"}}});
  return p;
}

// As the GPU kubelet plugin's template makes it: the pod of Deployment mps-control-daemon-<claim UID>-<hash>
// (through its ReplicaSet), app=<that name>, pinned with nodeName, no claim, no GPU request.
Json mps_daemon() {
  Json p = owned_pod("nvidia-dra-driver", kMpsApp + "-7d9f6b8c4-abcde", "ReplicaSet", kMpsApp + "-7d9f6b8c4",
                     {{"app", kMpsApp}}, "mps-control-daemon");
  p["spec"]["hostPID"] = true;
  return p;
}

Json workload(const std::string& name) {
  return owned_pod("ml", name, "ReplicaSet", name + "-rs", {{"app", name}});
}

TEST(DraHelpers, TheComputeDomainDaemonIsRecognisedByItsLabelAndItsDaemonSet) {
  const auto h = dra_helper_of(cd_daemon());
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->kind, DraHelperKind::kComputeDomainDaemon);
  EXPECT_EQ(h->key, kDomain);
  EXPECT_EQ(h->controller, "DaemonSet/computedomain-daemon-" + kDomain);
  EXPECT_EQ(describe(*h), "ComputeDomain daemon of ComputeDomain " + kDomain +
                              " (DaemonSet/computedomain-daemon-" + kDomain + ")");
  Json other = cd_daemon();
  other["metadata"]["ownerReferences"][0]["name"] = "computedomain-daemon-another";
  EXPECT_FALSE(dra_helper_of(other)) << "a DaemonSet of another domain's name";
  Json labelled = workload("trainer");
  labelled["metadata"]["labels"][std::string(kComputeDomainLabel)] = kDomain;
  EXPECT_FALSE(dra_helper_of(labelled)) << "the label alone, on a workload";
}

TEST(DraHelpers, TheMpsControlDaemonIsRecognisedByItsAppLabelReplicaSetAndContainer) {
  const auto h = dra_helper_of(mps_daemon());
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->kind, DraHelperKind::kMpsControlDaemon);
  EXPECT_EQ(h->key, kClaimUid) << "the claim UID its name carries";
  EXPECT_EQ(h->controller, "Deployment/" + kMpsApp);
  Json renamed = mps_daemon();
  renamed["spec"]["containers"][0]["name"] = "main";
  EXPECT_FALSE(dra_helper_of(renamed)) << "not the template's container";
  Json bare = mps_daemon();
  bare["metadata"].erase("ownerReferences");
  EXPECT_FALSE(dra_helper_of(bare)) << "no controller";
  EXPECT_FALSE(dra_helper_of(workload("trainer")));
}

TEST(DraHelpers, NoPipelineEvictsAHelperAndTheWorkloadEvictionDoesNotCountIt) {
  const std::vector<Json> pods = {cd_daemon(), mps_daemon(), workload("trainer")};
  PodFacts facts;
  facts.daemonset_exists = [](const std::string&, const std::string&) -> Result<bool> { return true; };
  // Every pod but the MPS daemon holds an NVIDIA claim: the daemon's own, the trainer's channel.
  facts.holds_gpu_claim = [](const Json& pod) -> Result<bool> {
    return kube::name(pod) != kube::name(mps_daemon());
  };
  auto eviction = decide_gpu_workload_eviction(pods, DrainOptions{}, facts);
  ASSERT_TRUE(eviction) << eviction.error().message;
  EXPECT_TRUE(eviction->pods.ok()) << "a helper is no refusal under the all-or-none rule";
  EXPECT_EQ(eviction->gpu_pods, 1U);
  ASSERT_EQ(eviction->pods.to_evict.size(), 1U);
  EXPECT_EQ(kube::name(eviction->pods.to_evict[0]), "trainer");
  for (size_t i = 0; i < 2; ++i) {
    const PodDecision& d = eviction->pods.decisions[i];
    EXPECT_EQ(d.verdict, Verdict::kSkip) << d.log_line();
    EXPECT_EQ(d.filter, "dra-helper");
    EXPECT_THAT(d.log_line(), HasSubstr("never evicted (its controller would bring it straight back)"));
  }
  EXPECT_THAT(eviction->pods.decisions[0].reason,
              HasSubstr("removes the node label resource.nvidia.com/computeDomain=" + kDomain));
  EXPECT_THAT(eviction->pods.decisions[1].reason, HasSubstr("unprepares its claim"));

  const DrainOptions force{.force = true, .delete_emptydir_data = true};
  const auto drained = decide_pods(full_drain_pipeline(force, LabelSelector{}, facts), pods);
  EXPECT_EQ(drained.to_evict.size(), 1U)
      << "the drain takes the workload, not the MPS daemon's Deployment pod";
  Json annotated = mps_daemon();
  annotated["metadata"]["annotations"]["nvidia.com/gpu.client"] = "true";
  const auto clients =
      decide_pods(gpu_client_pipeline({.force = true, .taint = std::nullopt, .label_pause = nullptr}),
                  std::vector<Json>{annotated});
  EXPECT_THAT(clients.to_evict, IsEmpty()) << "not even as an annotated GPU client";
  EXPECT_EQ(clients.decisions[0].filter, "dra-helper");
}

TEST(DraHelpers, WhatKeepsAHelperNamesItsLabelOrItsClaimAndWhoHoldsIt) {
  const DraHelper cd = *dra_helper_of(cd_daemon());
  const std::vector<ClaimHold> holds = {
      {.pod = "ml/trainer",
       .claim = "ml/trainer-channel",
       .uid = "c1",
       .driver = "compute-domain.nvidia.com"},
      {.pod = "ml/mps-user", .claim = "ml/mps-shared", .uid = kClaimUid, .driver = "gpu.nvidia.com"}};
  EXPECT_EQ(
      what_keeps(cd, kDomain, holds),
      "kept by the node label resource.nvidia.com/computeDomain=" + kDomain +
          ", while pods of the node still hold ComputeDomain claims: ml/trainer (claim ml/trainer-channel)");
  EXPECT_THAT(what_keeps(cd, kDomain, {}), HasSubstr("which the DRA kubelet plugin has not removed"));
  EXPECT_THAT(what_keeps(cd, std::nullopt, {}), HasSubstr("is gone, so its DaemonSet deletes it"));
  const DraHelper mps = *dra_helper_of(mps_daemon());
  EXPECT_EQ(what_keeps(mps, std::nullopt, holds),
            "kept by claim " + kClaimUid + ", still held by ml/mps-user (claim ml/mps-shared)");
  EXPECT_THAT(what_keeps(mps, std::nullopt, {}), HasSubstr("which no pod of the node holds"));
}

TEST(DraHelpers, OddShapesGetALineEach) {
  const Json labelled = {
      {"metadata", {{"name", "n1"}, {"labels", {{std::string(kComputeDomainLabel), kDomain}}}}}};
  const Json unlabelled = {{"metadata", {{"name", "n1"}}}};
  const std::vector<ClaimHold> held = {
      {.pod = "ml/u", .claim = "ml/c", .uid = kClaimUid, .driver = "gpu.nvidia.com"}};
  EXPECT_THAT(dra_helper_oddities(labelled, {cd_daemon(), mps_daemon()}, held), IsEmpty());
  const auto no_daemon = dra_helper_oddities(labelled, {workload("trainer")}, held);
  ASSERT_EQ(no_daemon.size(), 1U);
  EXPECT_THAT(no_daemon[0], HasSubstr("but no ComputeDomain daemon of that ComputeDomain runs on the node"));
  const auto leaving = dra_helper_oddities(unlabelled, {cd_daemon()}, held);
  ASSERT_EQ(leaving.size(), 1U);
  EXPECT_THAT(leaving[0], HasSubstr("is absent: its DaemonSet controller is taking it off the node"));
  const auto elsewhere = dra_helper_oddities(unlabelled, {mps_daemon()}, std::vector<ClaimHold>{});
  ASSERT_EQ(elsewhere.size(), 1U);
  EXPECT_THAT(elsewhere[0],
              HasSubstr("but no pod of this node holds that claim (its Deployment pinned here"));
  EXPECT_THAT(dra_helper_oddities(unlabelled, {mps_daemon()}, std::nullopt), IsEmpty())
      << "claims not read: nothing said of them";
}

// `plan` on a node with both helpers, the workloads holding their claims and the operator's DRA plugin.
PlanInputs helper_inputs() {
  PlanInputs in;
  in.node = {{"metadata",
              {{"name", "n1"},
               {"labels",
                {{"nvidia.com/gpu.deploy.device-plugin", "true"},
                 {"nvidia.com/gpu.deploy.dra-driver", "true"},
                 {std::string(kComputeDomainLabel), kDomain}}}}}};
  Json trainer = workload("trainer");
  trainer["spec"]["resourceClaims"] =
      Json::array({{{"name", "channel"}, {"resourceClaimName", "trainer-channel"}}});
  Json user = workload("mps-user");
  user["spec"]["resourceClaims"] = Json::array({{{"name", "gpu"}, {"resourceClaimName", "mps-shared"}}});
  in.pods = {trainer, user, cd_daemon(), mps_daemon()};
  // The claims as the API lists them: the facts are read from that list, as the wave reads them.
  const auto claim = [](const std::string& ns, const std::string& name, const std::string& uid,
                        const std::string& driver) {
    return Json{{"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
                {"status",
                 {{"allocation",
                   {{"devices", {{"results", Json::array({{{"driver", driver}, {"device", "d0"}}})}}}}}}}};
  };
  in.claims = std::vector<Json>{claim("ml", "trainer-channel", "c1", "compute-domain.nvidia.com"),
                                claim("ml", "mps-shared", kClaimUid, "gpu.nvidia.com")};
  in.facts = listed_pod_facts(nullptr, std::make_shared<const std::vector<Json>>(*in.claims));
  in.pdbs = std::vector<Json>{};
  in.nvidia_loaded = true;
  in.skip.summary = "the loaded driver's configuration digest differs from DRIVER_CONFIG_DIGEST";
  return in;
}

Settings plan_settings() {
  Settings s;
  s.node_name = "n1";
  s.enable_auto_drain = false;
  s.driver_config_digest = "new";
  return s;
}

const PlanPod& find(const Plan& p, const std::string& ref) {
  for (const auto& pod : p.pods) {
    if (pod.pod == ref) return pod;
  }
  throw std::runtime_error("no pod " + ref);
}

TEST(DraHelpersPlan, EachHelperIsWaitedForAfterItsWorkloadsAndBeforeTheClaimGuard) {
  const Plan p = build_plan(plan_settings(), helper_inputs());
  ASSERT_EQ(p.flow.path, RunPath::kFull);
  EXPECT_EQ(find(p, "ml/trainer").action, PodAction::kEvict) << "a channel-claim holder is a GPU workload";
  EXPECT_EQ(find(p, "ml/mps-user").action, PodAction::kEvict);
  for (const auto& ref : {"nvidia-dra-driver/computedomain-daemon-" + kDomain + "-x7k2p",
                          "nvidia-dra-driver/" + kMpsApp + "-7d9f6b8c4-abcde"}) {
    const PlanPod& helper = find(p, ref);
    EXPECT_EQ(helper.action, PodAction::kWait) << ref;
    EXPECT_EQ(helper.step, "dra-helpers") << ref;
    EXPECT_EQ(helper.filter, "dra-helper") << ref;
    EXPECT_THAT(helper.reason, HasSubstr("never evicted")) << ref;
  }
  size_t helpers = 0;
  size_t guard = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (p.steps[i].find("wait for the DRA driver's helper pods") != std::string::npos) helpers = i + 1;
    if (p.steps[i].find("check that no pod still holds") != std::string::npos) guard = i + 1;
  }
  ASSERT_GT(helpers, 0U);
  EXPECT_LT(helpers, guard);
  EXPECT_THAT(p.notes, IsEmpty());
  test::expect_golden("plan/dra-helpers.txt", render_plan_text(p));
}

TEST(DraHelpersPlan, OddShapesAreNotesAndNoHelperNoLine) {
  PlanInputs in = helper_inputs();
  in.pods.erase(in.pods.begin() + 2);  // the ComputeDomain daemon is not on the node
  in.pods.erase(in.pods.begin() + 1);  // nor the MPS claim's user
  const Plan p = build_plan(plan_settings(), in);
  ASSERT_EQ(p.notes.size(), 2U);
  EXPECT_THAT(p.notes[0], HasSubstr(kMpsApp + "-7d9f6b8c4-abcde: MPS control daemon of claim " + kClaimUid));
  EXPECT_THAT(p.notes[0], HasSubstr("no pod of this node holds that claim"));
  EXPECT_THAT(p.notes[1], HasSubstr("node label resource.nvidia.com/computeDomain=" + kDomain +
                                    " but no ComputeDomain daemon"));
  in = helper_inputs();
  in.pods.resize(2);
  in.node["metadata"]["labels"].erase(std::string(kComputeDomainLabel));
  const Plan plain = build_plan(plan_settings(), in);
  for (const auto& s : plain.steps)
    EXPECT_THAT(s, ::testing::Not(HasSubstr("helper"))) << "no helper, no line";
  EXPECT_THAT(plain.notes, IsEmpty());
}

}  // namespace
}  // namespace dm::manager
