// The planning half of the gpu-client taint (docs/gpu-clients.md, The taint): which patch adds or removes our
// taint, with the ownership annotation and the resourceVersion precondition, and what is never touched.
#include "manager/node/taint_ops.h"

#include <gtest/gtest.h>

#include "manager/pods/gpu_clients.h"
#include "support/doubles.h"
#include "support/memory_cluster.h"

namespace dm::manager {
namespace {

using Json = nlohmann::json;
using kube::Taint;

const Taint kOurs{"nvidia.com/gpu-driver-update", "k8s-driver-manager", "NoSchedule"};

Json node(const Json& taints, const Json& annotations = Json::object(), const std::string& rv = "42") {
  Json n = {{"metadata", {{"name", "n1"}, {"resourceVersion", rv}, {"annotations", annotations}}},
            {"spec", Json::object()}};
  if (!taints.is_null()) n["spec"]["taints"] = taints;
  return n;
}

Json owner(const std::string& v) {
  return {{std::string(kTaintOwnerAnnotation), v}};
}

TEST(TaintAddDecision, AddsTaintAndOwnershipConditionalOnResourceVersion) {
  const Json other = {{"key", "dedicated"}, {"value", "ml"}, {"effect", "NoExecute"}};
  const auto plan = decide_taint_add(node(Json::array({other})), kOurs);
  EXPECT_EQ(plan.outcome, TaintOutcome::kAdded);
  EXPECT_EQ(plan.effective, kOurs);
  ASSERT_TRUE(plan.patch.has_value());
  const Json& p = *plan.patch;
  EXPECT_EQ(p["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(p["metadata"]["annotations"][std::string(kTaintOwnerAnnotation)],
            "nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule");
  // The whole list is sent (merge patch): the other taint is kept, ours appended.
  EXPECT_EQ(p["spec"]["taints"], Json::array({other, kOurs.to_json()}));
}

TEST(TaintAddDecision, NodeWithoutTaints) {
  const auto plan = decide_taint_add(node(nullptr), kOurs);
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_EQ((*plan.patch)["spec"]["taints"], Json::array({kOurs.to_json()}));
}

TEST(TaintAddDecision, SameKeyAndEffectAlreadyThereIsLeftAloneAndNotOwned) {
  const Taint seed{"nvidia.com/gpu", "", "NoSchedule"};
  const Json present = {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}};
  const auto plan = decide_taint_add(node(Json::array({present})), seed);
  EXPECT_EQ(plan.outcome, TaintOutcome::kPresentNotOurs);
  EXPECT_FALSE(plan.patch.has_value());
  // Toleration warnings must be about the taint really on the node.
  EXPECT_EQ(plan.effective, (Taint{"nvidia.com/gpu", "present", "NoSchedule"}));
}

TEST(TaintAddDecision, SameKeyOtherEffectIsADifferentTaint) {
  const Json other = {{"key", "nvidia.com/gpu-driver-update"}, {"effect", "NoExecute"}};
  const auto plan = decide_taint_add(node(Json::array({other})), kOurs);
  EXPECT_EQ(plan.outcome, TaintOutcome::kAdded);
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_EQ((*plan.patch)["spec"]["taints"].size(), 2U);
}

TEST(TaintAddDecision, OursFromAnEarlierRunIsRecognised) {
  const auto plan = decide_taint_add(node(Json::array({kOurs.to_json()}), owner(kOurs.to_string())), kOurs);
  EXPECT_EQ(plan.outcome, TaintOutcome::kAlreadyOurs);
  EXPECT_FALSE(plan.patch.has_value());
}

TEST(TaintAddDecision, IdenticalTaintWithoutOurAnnotationIsNotOurs) {
  // Someone else (an admin, another tool) put exactly our taint there: never take it for ours.
  const auto plan = decide_taint_add(node(Json::array({kOurs.to_json()})), kOurs);
  EXPECT_EQ(plan.outcome, TaintOutcome::kPresentNotOurs);
  EXPECT_FALSE(plan.patch.has_value());
}

TEST(TaintAddDecision, StaleTaintOfOursWithOtherSettingsIsReplaced) {
  const Taint old{"example.com/reset", "", "NoSchedule"};
  const auto plan = decide_taint_add(node(Json::array({old.to_json()}), owner(old.to_string())), kOurs);
  EXPECT_EQ(plan.outcome, TaintOutcome::kAdded);
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_EQ((*plan.patch)["spec"]["taints"], Json::array({kOurs.to_json()}));
  EXPECT_EQ((*plan.patch)["metadata"]["annotations"][std::string(kTaintOwnerAnnotation)], kOurs.to_string());
}

TEST(TaintAddDecision, StaleOwnershipDroppedWhenSomeoneElsesTaintHasTheKey) {
  // Our annotation names a taint whose value someone changed: it is theirs now.
  const Json changed = {{"key", kOurs.key}, {"value", "admin"}, {"effect", "NoSchedule"}};
  const auto plan = decide_taint_add(node(Json::array({changed}), owner(kOurs.to_string())), kOurs);
  EXPECT_EQ(plan.outcome, TaintOutcome::kPresentNotOurs);
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_TRUE((*plan.patch)["metadata"]["annotations"][std::string(kTaintOwnerAnnotation)].is_null());
  EXPECT_EQ((*plan.patch)["spec"]["taints"], Json::array({changed}));
}

TEST(TaintRemoveDecision, NothingWithoutOurAnnotation) {
  const auto plan = decide_taint_remove(node(Json::array({kOurs.to_json()})));
  EXPECT_FALSE(plan.owned.has_value());
  EXPECT_FALSE(plan.patch.has_value());
}

TEST(TaintRemoveDecision, RemovesExactlyOursAndTheAnnotation) {
  const Json admin = {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}};
  const Json late = {{"key", "example.com/other"}, {"effect", "PreferNoSchedule"}};
  const auto plan =
      decide_taint_remove(node(Json::array({admin, kOurs.to_json(), late}), owner(kOurs.to_string()), "77"));
  ASSERT_TRUE(plan.removed.has_value());
  EXPECT_EQ(*plan.removed, kOurs);
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_EQ((*plan.patch)["metadata"]["resourceVersion"], "77");
  EXPECT_TRUE((*plan.patch)["metadata"]["annotations"][std::string(kTaintOwnerAnnotation)].is_null());
  EXPECT_EQ((*plan.patch)["spec"]["taints"], Json::array({admin, late}));
}

TEST(TaintRemoveDecision, LastTaintRemovedClearsTheList) {
  const auto plan = decide_taint_remove(node(Json::array({kOurs.to_json()}), owner(kOurs.to_string())));
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_TRUE((*plan.patch)["spec"]["taints"].is_null());
}

TEST(TaintRemoveDecision, SameKeyOtherValueIsNotRemoved) {
  const Json theirs = {{"key", kOurs.key}, {"value", "admin"}, {"effect", "NoSchedule"}};
  const auto plan = decide_taint_remove(node(Json::array({theirs}), owner(kOurs.to_string())));
  EXPECT_FALSE(plan.removed.has_value());
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_EQ((*plan.patch)["spec"]["taints"], Json::array({theirs}));
}

TEST(TaintRemoveDecision, UnparsableAnnotationIsDroppedAlone) {
  const Json t = kOurs.to_json();
  const auto plan = decide_taint_remove(node(Json::array({t}), owner("garbage")));
  EXPECT_FALSE(plan.removed.has_value());
  ASSERT_TRUE(plan.patch.has_value());
  EXPECT_EQ((*plan.patch)["spec"]["taints"], Json::array({t}));
}

TEST(LabelHandledClientKeys, OnlyKeysWhoseLabelIsPaused) {
  const auto keys = [](const Snapshot& s, const std::string& custom) {
    return label_pause(s, operand_table(custom)).keys;
  };
  Snapshot s;
  s.labels[std::string(kClientLabel)] = "true";
  s.labels["example.com/gpu-clients"] = "";
  EXPECT_EQ(keys(s, "example.com/gpu-clients"), std::vector<std::string>{std::string(kClientLabel)});
  s.labels["example.com/gpu-clients"] = "on";
  EXPECT_EQ(keys(s, "example.com/gpu-clients"),
            (std::vector<std::string>{std::string(kClientLabel), "example.com/gpu-clients"}));
  s.labels[std::string(kClientLabel)] = "";
  EXPECT_EQ(keys(s, ""), std::vector<std::string>{});
}

// A run whose pod does not tolerate the taint refuses to add it, deciding on a fresh read; a taint with the
// key and effect already on the node is taken as it is, as without the refusal.
TEST(TaintOps, ARefusalStopsOnlyAWriteThatWouldAddTheTaint) {
  test::MemoryCluster cluster;
  const test::FakeClock clock;
  ASSERT_TRUE(cluster.create(kube::paths::nodes(),
                             {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}));
  KnownNode known;
  TaintOps ops(cluster, clock, CancelToken(), "n1");
  ops.use_known_node(&known);
  ops.refuse_to_add(Error("this pod does not tolerate it"));
  auto refused = ops.add(kOurs);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "this pod does not tolerate it");
  auto n = cluster.get(kube::paths::node("n1"));
  ASSERT_TRUE(n);
  EXPECT_FALSE((*n)["spec"].contains("taints")) << n->dump();

  known.remember(*n);  // a copy from before the admin's taint: the decision waits for a fresh read
  const Json present = {{"key", kOurs.key}, {"value", "admin"}, {"effect", kOurs.effect}};
  ASSERT_TRUE(cluster.patch(kube::paths::node("n1"), kube::PatchType::kMerge,
                            {{"spec", {{"taints", Json::array({present})}}}}));
  auto taken = ops.add(kOurs);
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(taken->outcome, TaintOutcome::kPresentNotOurs);
}

}  // namespace
}  // namespace dm::manager
