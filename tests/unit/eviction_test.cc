#include "manager/pods/eviction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dm::manager {
namespace {

using ::testing::ElementsAre;
using Json = nlohmann::json;

EvictionTarget target(const std::string& name, int64_t grace, bool evict = true) {
  return {"ns", name, "uid-" + name, evict, grace};
}

TEST(EvictionOrder, TheLongestGracePeriodGoesFirstAndTiesKeepTheirOrder) {
  const std::vector<EvictionTarget> targets = {target("monitor", 5), target("trainer", 300),
                                               target("agent-a", 30), target("agent-b", 30),
                                               target("notebook", 60)};
  EXPECT_THAT(eviction_order(targets), ElementsAre(1, 4, 2, 3, 0));
}

TEST(EvictionOrder, PodsOnlyWaitedForAreNotEvicted) {
  const std::vector<EvictionTarget> targets = {target("a", 30), target("terminating", 600, false),
                                               target("b", 10)};
  EXPECT_THAT(eviction_order(targets), ElementsAre(0, 2));
}

TEST(EvictionOrder, AGracePeriodGivenToEveryPodKeepsTheOrderGiven) {
  const std::vector<EvictionTarget> targets = {target("a", 5), target("b", 300), target("c", 30)};
  EXPECT_THAT(eviction_order(targets, 10), ElementsAre(0, 1, 2));
}

TEST(EvictionOrder, ATargetCarriesThePodsOwnGracePeriod) {
  const Json pod = Json::parse(R"({"metadata": {"namespace": "n", "name": "p", "uid": "u"},
                                   "spec": {"terminationGracePeriodSeconds": 120}})");
  EXPECT_EQ(eviction_target(pod).grace_seconds, 120);
  // Once terminating, the grace period the deletion gave it.
  const Json terminating = Json::parse(R"({"metadata": {"namespace": "n", "name": "p", "uid": "u",
                                           "deletionTimestamp": "2026-12-01T00:00:00Z",
                                           "deletionGracePeriodSeconds": 7},
                                           "spec": {"terminationGracePeriodSeconds": 120}})");
  EXPECT_EQ(eviction_target(terminating).grace_seconds, 7);
  EXPECT_EQ(eviction_target(Json::parse(R"({"metadata": {"name": "p"}})")).grace_seconds, 30);
}

TEST(EvictionOrder, APlansTerminatingPodsAreOnlyWaitedFor) {
  PodListDecision plan;
  plan.to_evict.push_back(Json::parse(R"({"metadata": {"namespace": "n", "name": "a", "uid": "ua"}})"));
  plan.to_wait.push_back(Json::parse(R"({"metadata": {"namespace": "n", "name": "b", "uid": "ub"}})"));
  const auto targets = targets_of(plan);
  ASSERT_EQ(targets.size(), 2U);
  EXPECT_EQ(targets[0].uid, "ua");
  EXPECT_TRUE(targets[0].evict);
  EXPECT_EQ(targets[1].uid, "ub");
  EXPECT_FALSE(targets[1].evict);
}

}  // namespace
}  // namespace dm::manager
