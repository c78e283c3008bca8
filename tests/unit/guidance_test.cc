#include "manager/guidance.h"

#include <gtest/gtest.h>

namespace dm::manager {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(GuidanceTest, PolicyGuidanceHasFourNumberedOptionsAndTheLabelCommand) {
  const std::string g = policy_guidance("gpu-node-1");
  for (const char* n : {"  1. ", "  2. ", "  3. ", "  4. "}) EXPECT_EQ(count(g, n), 1U) << n;
  EXPECT_EQ(count(g, "  5. "), 0U);
  EXPECT_NE(
      g.find(
          "kubectl label node gpu-node-1 nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite"),
      std::string::npos);
  EXPECT_NE(g.find("ENABLE_GPU_POD_EVICTION=true"), std::string::npos);
  EXPECT_NE(g.find("node gpu-node-1"), std::string::npos);
  EXPECT_NE(g.find("auto-upgrade policy"), std::string::npos);
}

TEST(GuidanceTest, NoEvictionGuidanceHasThreeNumberedOptions) {
  const std::string g = no_eviction_guidance("n2");
  for (const char* n : {"  1. ", "  2. ", "  3. "}) EXPECT_EQ(count(g, n), 1U) << n;
  EXPECT_EQ(count(g, "  4. "), 0U);
  EXPECT_NE(g.find("ENABLE_GPU_POD_EVICTION"), std::string::npos);
  EXPECT_NE(g.find("ENABLE_AUTO_DRAIN"), std::string::npos);
  EXPECT_NE(g.find("node n2"), std::string::npos);
}

TEST(GuidanceTest, GpuClientLineNamesBothDesignations) {
  const std::string g = gpu_client_guidance("n3");
  EXPECT_EQ(g.find('\n'), std::string::npos);
  EXPECT_NE(g.find("nvidia.com/gpu.client"), std::string::npos);
  EXPECT_NE(g.find("nvidia.com/gpu.deploy.client"), std::string::npos);
  EXPECT_NE(g.find("node n3"), std::string::npos);
}

TEST(GuidanceTest, CleanupGuidanceChoosesByPolicyAndFlags) {
  EXPECT_EQ(cleanup_guidance("n", true, true, true), policy_guidance("n") + "\n" + gpu_client_guidance("n"));
  EXPECT_EQ(cleanup_guidance("n", false, false, false),
            no_eviction_guidance("n") + "\n" + gpu_client_guidance("n"));
  EXPECT_EQ(cleanup_guidance("n", false, true, false), "");
  EXPECT_EQ(cleanup_guidance("n", false, false, true), "");
}

}  // namespace
}  // namespace dm::manager
