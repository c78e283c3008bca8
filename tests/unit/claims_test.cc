#include "manager/rules/claims.h"

#include <gtest/gtest.h>

#include "support/process.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

Json fixture(const std::string& name) {
  return Json::parse(test::read_file(test::source_path("tests/fixtures/pods/" + name + ".json")));
}

TEST(ClaimsTest, ResolvesDirectAndTemplateGeneratedClaimNames) {
  // "gpu" comes from a template (name in status), "shared" names its claim, "pending" is not resolved yet.
  EXPECT_EQ(claim_names(fixture("dra-claim-pod")),
            (std::vector<std::string>{"dra-trainer-gpu-x7k2p", "shared-gpus"}));
}

TEST(ClaimsTest, PodsWithoutClaimsHaveNone) {
  EXPECT_TRUE(claim_names(fixture("gpu-deployment-pod")).empty());
  EXPECT_TRUE(claim_names(Json::object()).empty());
  Json p = fixture("dra-claim-pod");
  p["status"].erase("resourceClaimStatuses");
  EXPECT_EQ(claim_names(p), std::vector<std::string>{"shared-gpus"});
}

TEST(ClaimsTest, AllocatedGpuClaims) {
  EXPECT_TRUE(is_allocated_gpu_claim(fixture("claim-gpu-allocated")));
  EXPECT_TRUE(is_allocated_gpu_claim(fixture("claim-gpu-admin")));
  EXPECT_TRUE(is_allocated_gpu_claim(fixture("claim-mixed")));
  EXPECT_FALSE(is_allocated_gpu_claim(fixture("claim-unallocated")));
  EXPECT_TRUE(is_allocated_gpu_claim(fixture("claim-computedomain")))
      << "ComputeDomain claims (IMEX channels, the daemon's own) hold the driver too";
  EXPECT_EQ(nvidia_claim_driver(fixture("claim-computedomain")), "compute-domain.nvidia.com");
  EXPECT_EQ(nvidia_claim_driver(fixture("claim-mixed")), "gpu.nvidia.com");
  EXPECT_EQ(nvidia_claim_driver(fixture("claim-unallocated")), "");
  Json null_alloc = fixture("claim-gpu-allocated");
  null_alloc["status"]["allocation"] = nullptr;
  EXPECT_FALSE(is_allocated_gpu_claim(null_alloc));
  EXPECT_FALSE(is_allocated_gpu_claim(Json::object()));
}

}  // namespace
}  // namespace dm::manager
