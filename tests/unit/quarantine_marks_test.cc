// The table of other controllers' quarantine and maintenance marks (manager/rules/quarantine.h): each mark
// is found where it sits on a node, with its value, and nothing else is taken for one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "manager/rules/quarantine.h"

namespace dm::manager {
namespace {

using Json = nlohmann::json;

Json node_with(const Json& metadata, const Json& taints = Json::array()) {
  return {{"metadata", metadata}, {"spec", {{"taints", taints}}}};
}

TEST(QuarantineMarks, EachMarkIsFoundWhereItSitsWithItsValue) {
  struct Case {
    Json node;
    std::string described;
  };
  const std::vector<Case> cases = {
      {node_with({{"annotations", {{"quarantineHealthEvent", "{\"checkName\":\"GpuXidError\"}"}}}}),
       "NVSentinel's fault quarantine (annotation quarantineHealthEvent={\"checkName\":\"GpuXidError\"})"},
      {node_with({{"labels", {{"dgxc.nvidia.com/nvsentinel-state", "remediating"}}}}),
       "NVSentinel's break-fix workflow (label dgxc.nvidia.com/nvsentinel-state=remediating)"},
      {node_with({{"annotations", {{"weave.works/kured-reboot-in-progress", "2026-01-18T04:58:47Z"}}}}),
       "kured's reboot (annotation weave.works/kured-reboot-in-progress=2026-01-18T04:58:47Z)"},
      {node_with(Json::object(), Json::array({{{"key", "medik8s.io/drain"}, {"effect", "NoSchedule"}}})),
       "node-maintenance-operator's node maintenance (taint medik8s.io/drain:NoSchedule)"},
  };
  for (const auto& c : cases) {
    const auto found = quarantine_mark(c.node);
    ASSERT_TRUE(found) << c.node.dump();
    EXPECT_EQ(found->describe(), c.described);
  }
}

TEST(QuarantineMarks, ALongValueIsCutInItsDescription) {
  const std::string event(300, 'x');
  const auto found = quarantine_mark(node_with({{"annotations", {{"quarantineHealthEvent", event}}}}));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->value, event);
  EXPECT_EQ(found->describe(), "NVSentinel's fault quarantine (annotation quarantineHealthEvent=" +
                                   std::string(80, 'x') + "...)");
}

// The same keys in another place, a key that only looks alike, NVSentinel's opt-out label and the GPU
// Operator's upgrade state claim nothing.
TEST(QuarantineMarks, NothingElseIsTakenForAMark) {
  EXPECT_FALSE(quarantine_mark(Json::object()));
  EXPECT_FALSE(quarantine_mark(node_with({{"labels", {{"quarantineHealthEvent", "x"}}},
                                          {"annotations", {{"dgxc.nvidia.com/nvsentinel-state", "x"}}}})));
  EXPECT_FALSE(quarantine_mark(node_with({{"labels",
                                           {{"k8saas.nvidia.com/ManagedByNVSentinel", "false"},
                                            {"nvidia.com/gpu-driver-upgrade-state", "pod-restart-required"}}},
                                          {"annotations", {{"quarantineHealthEventIsCordoned", "True"}}}})));
  EXPECT_FALSE(quarantine_mark(
      node_with(Json::object(), Json::array({{{"key", "medik8s.io/drain-x"}, {"effect", "NoSchedule"}}}))));
}

// The first mark of the table names the claim when several are on the node.
TEST(QuarantineMarks, TheTablesOrderNamesTheClaim) {
  const auto found =
      quarantine_mark(node_with({{"labels", {{"dgxc.nvidia.com/nvsentinel-state", "quarantined"}}},
                                 {"annotations", {{"quarantineHealthEvent", "{}"}}}}));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->mark->key, "quarantineHealthEvent");
}

}  // namespace
}  // namespace dm::manager
