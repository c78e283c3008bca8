#include "manager/rules/guidance.h"

#include <gtest/gtest.h>

#include "common/log.h"
#include "fixtures/upstream/log_lines.h"

namespace dm::manager {
namespace {

using test::upstream::log_messages;
using test::upstream::upstream_text;

TEST(GuidanceTest, PolicyGuidanceIsUpstreamsBlock) {
  EXPECT_EQ(policy_guidance("gpu-node-1"), upstream_text("guidance_policy", {"gpu-node-1", "gpu-node-1"}));
}

TEST(GuidanceTest, NoEvictionGuidanceIsUpstreamsBlock) {
  EXPECT_EQ(no_eviction_guidance("n2"), upstream_text("guidance_no_eviction", {"n2"}));
}

TEST(GuidanceTest, GpuClientLineNamesBothDesignations) {
  const std::string g = gpu_client_guidance("n3");
  EXPECT_EQ(g.find('\n'), std::string::npos);
  EXPECT_NE(g.find("nvidia.com/gpu.client"), std::string::npos);
  EXPECT_NE(g.find("nvidia.com/gpu.deploy.client"), std::string::npos);
  EXPECT_NE(g.find("node n3"), std::string::npos);
}

TEST(GuidanceTest, CleanupGuidanceChoosesByPolicyAndFlags) {
  EXPECT_EQ(cleanup_guidance("n", {.policy_enabled = true, .gpu_pod_eviction = true, .auto_drain = true}),
            policy_guidance("n"));
  EXPECT_EQ(cleanup_guidance("n", {}), no_eviction_guidance("n"));
  EXPECT_EQ(cleanup_guidance("n", {.gpu_pod_eviction = true}), "");
  EXPECT_EQ(cleanup_guidance("n", {.auto_drain = true}), "");
}

// The multi-line block goes through the text log unchanged (tabs, blank lines, final newline), next to
// other records.
TEST(GuidanceTest, TextLogCarriesTheBlockVerbatim) {
  const std::string block = policy_guidance("n4");
  const std::string log = format_log_line(LogFormat::kText, "warning", "2026-01-01T00:00:00Z", block) +
                          format_log_line(LogFormat::kText, "info", "2026-01-01T00:00:01Z", "next");
  const auto msgs = log_messages(log);
  ASSERT_EQ(msgs.size(), 2U) << log;
  EXPECT_EQ(msgs[0], upstream_text("guidance_policy", {"n4", "n4"}));
  EXPECT_EQ(msgs[1], "next");
}

}  // namespace
}  // namespace dm::manager
