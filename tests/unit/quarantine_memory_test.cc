// Another controller's quarantine on the run's node, in the in-memory tier (tests/support/memory_scenario.h):
// NVSentinel's fault quarantine (tests/support/quarantine_standin.h) marks the node while DCGM is down
// during the run, and the run undoes its labels and taint but leaves the cordon, saying why; `recover`
// does the same; and docs/gpu-clients.md's recipe keeps NVSentinel off a node under a driver upgrade.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "manager/commands/recover.h"
#include "support/memory_scenario.h"
#include "support/quarantine_standin.h"

namespace dm::test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kCordoned = "nvidia.com/gpu-driver-manager.cordoned";

// The operands with DCGM, which the stand-in watches; stuck terminating, the stand-in finishes it.
MemSetup with_dcgm(std::vector<MemPod> pods) {
  auto ops = default_mem_operands();
  ops.push_back({.label = "dcgm", .app = "nvidia-dcgm", .stuck = true});
  return {.operands = ops, .pods = std::move(pods)};
}

// Long enough that the stand-in has decided before the operand wait could end any other way.
manager::Settings patient(const MemoryScenario& s) {
  auto settings = s.settings();
  settings.operand_wait_timeout = std::chrono::minutes(30);
  return settings;
}

std::vector<nlohmann::json> events_with_reason(MemoryScenario& s, const std::string& reason) {
  std::vector<nlohmann::json> out;
  for (const auto& e : s.cluster().objects("/api/v1/namespaces/default/events")) {
    if (e.value("reason", "") == reason) out.push_back(e);
  }
  return out;
}

std::string summary_line(const std::string& log) {
  const auto at = log.find("Summary: ");
  return at == std::string::npos ? std::string() : log.substr(at, log.find('\n', at) - at);
}

// NVSentinel quarantines the node while the run has DCGM paused (the cordon already on from the run): the
// run ends well, its labels and taint are undone, its cordon stays under NVSentinel's quarantine - with our
// annotation, so that a later undo lifts it once the quarantine is over - and the log, an Event on the node
// and the summary line say why.
TEST(Quarantine, MarksThatAppearMidRunKeepTheCordonWhileTheRestIsRestored) {
  MemoryScenario s;
  s.deploy(with_dcgm({{.name = "trainer", .request_gpu = true}, {.name = "agent", .gpu_client = "true"}}));
  const auto before = s.state();
  const auto api = s.cluster().controller_client();
  QuarantineStandIn nvsentinel(*api, {.node = s.node(), .ns = s.operator_ns()});

  const auto r = s.run(patient(s));

  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_TRUE(nvsentinel.quarantined()) << nvsentinel.error() << r.log;
  EXPECT_FALSE(s.driver_loaded());
  const auto after = s.state();
  auto expected = before;
  expected.unschedulable = true;
  expected.labels[kNvsStateLabel] = "quarantined";
  expected.annotations[kNvsQuarantineAnnotation] = after.annotations.count(kNvsQuarantineAnnotation) > 0
                                                       ? after.annotations.at(kNvsQuarantineAnnotation)
                                                       : "<absent>";
  expected.annotations[kCordoned] = "true";
  EXPECT_EQ(after, expected) << "labels back, taint and the run's records gone, the cordon kept";
  EXPECT_THAT(r.log, HasSubstr("Cordoning node node-a"));
  EXPECT_THAT(r.log, HasSubstr("Leaving node node-a cordoned: it is under NVSentinel's fault quarantine "
                               "(annotation quarantineHealthEvent={\"agent\":\"gpu-health-monitor\""));
  EXPECT_THAT(r.log, HasSubstr("uncordoning it would cancel that"));
  EXPECT_THAT(r.log, Not(HasSubstr("Uncordoning node")));
  EXPECT_THAT(r.log, HasSubstr("Rescheduling all GPU clients on the current node"));
  EXPECT_THAT(summary_line(r.log),
              HasSubstr("; left on the node: the cordon, under NVSentinel's fault quarantine (annotation "
                        "quarantineHealthEvent="));
  const auto kept = events_with_reason(s, "CordonKept");
  ASSERT_EQ(kept.size(), 1U);
  EXPECT_EQ(kept[0].value("type", ""), "Warning");
  EXPECT_THAT(
      kept[0].value("message", ""),
      HasSubstr("driver-manager left node node-a cordoned: it is under NVSentinel's fault quarantine"));
}

// What a run that was killed left: our cordon, which NVSentinel has taken into its break-fix workflow since.
// recover leaves it and says why; once NVSentinel's marks are gone, the cordon is ours alone again and
// recover lifts it.
TEST(Quarantine, RecoverLeavesACordonOfOursUnderQuarantineAndLiftsItOnceTheMarksAreGone) {
  MemoryScenario s;
  s.deploy({});
  auto node = s.node_json();
  node["spec"]["unschedulable"] = true;
  node["metadata"]["annotations"][kCordoned] = "true";
  node["metadata"]["labels"][kNvsStateLabel] = "draining";
  s.cluster().apply(node);
  SystemClock clock;

  auto first = manager::recover_node(s.cluster(), clock, s.node(), manager::LiveLease::kRefuse);

  ASSERT_TRUE(first) << first.error().message;
  EXPECT_THAT(first->left, Contains("the cordon, under NVSentinel's break-fix workflow (label "
                                    "dgxc.nvidia.com/nvsentinel-state=draining)"));
  EXPECT_THAT(first->done, Not(Contains("uncordoned")));
  EXPECT_TRUE(s.state().unschedulable);
  EXPECT_EQ(s.state().annotations.count(kCordoned), 1U);
  EXPECT_EQ(events_with_reason(s, "CordonKept").size(), 1U);

  node = s.node_json();
  node["metadata"]["labels"].erase(kNvsStateLabel);
  s.cluster().apply(node);
  auto second = manager::recover_node(s.cluster(), clock, s.node(), manager::LiveLease::kRefuse);

  ASSERT_TRUE(second) << second.error().message;
  EXPECT_THAT(second->done, Contains("uncordoned"));
  EXPECT_TRUE(second->left.empty());
  EXPECT_FALSE(s.state().unschedulable);
  EXPECT_EQ(s.state().annotations.count(kCordoned), 0U);
}

// docs/gpu-clients.md's recipe with the GPU Operator's upgrade controller: its state label covers the
// whole upgrade, the stand-in sees DCGM go down and leaves the node alone. The controller owns the cordon
// (the policy is on), and nothing of NVSentinel's is on the node afterwards.
TEST(Quarantine, TheRecipeKeepsTheQuarantineOffANodeTheUpgradeControllerHasInAnUpgrade) {
  MemoryScenario s;
  s.deploy(with_dcgm({}));
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
  s.label_node({{kUpgradeStateLabel, "pod-restart-required"}});
  s.cordon();  // the upgrade controller's, from cordon-required
  const auto api = s.cluster().controller_client();
  QuarantineStandIn nvsentinel(*api, {.node = s.node(), .ns = s.operator_ns()});

  const auto r = s.run(patient(s));

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_TRUE(nvsentinel.saw_dcgm_down()) << nvsentinel.error();
  EXPECT_TRUE(nvsentinel.excluded());
  EXPECT_FALSE(nvsentinel.quarantined());
  const auto after = s.state();
  EXPECT_EQ(after.labels.count(kNvsStateLabel), 0U);
  EXPECT_EQ(after.annotations.count(kNvsQuarantineAnnotation), 0U);
  EXPECT_TRUE(after.unschedulable) << "the upgrade controller's cordon";
  EXPECT_THAT(r.log, Not(HasSubstr("Leaving node node-a cordoned")));
}

// The recipe without the upgrade controller: the admin's opt-out label for the upgrade. The stand-in sees
// DCGM go down and leaves the node alone, and the run lifts its own cordon as it always did.
TEST(Quarantine, TheRecipesOptOutWithoutTheUpgradeControllerLetsTheRunLiftItsCordon) {
  MemoryScenario s;
  s.deploy(with_dcgm({{.name = "trainer", .request_gpu = true}}));
  s.label_node({{kNvsOptOutLabel, "false"}});
  const auto api = s.cluster().controller_client();
  QuarantineStandIn nvsentinel(*api, {.node = s.node(), .ns = s.operator_ns()});

  const auto r = s.run(patient(s));

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_TRUE(nvsentinel.saw_dcgm_down()) << nvsentinel.error();
  EXPECT_TRUE(nvsentinel.excluded());
  EXPECT_FALSE(nvsentinel.quarantined());
  EXPECT_THAT(r.log, HasSubstr("Cordoning node node-a"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  EXPECT_THAT(summary_line(r.log), Not(HasSubstr("left on the node")));
  EXPECT_FALSE(s.state().unschedulable);
  EXPECT_EQ(s.state().annotations.count(kCordoned), 0U);
  EXPECT_EQ(s.label(kNvsOptOutLabel), "false") << "the admin's label is theirs to remove";
  EXPECT_TRUE(events_with_reason(s, "CordonKept").empty());
}

}  // namespace
}  // namespace dm::test
