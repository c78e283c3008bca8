#include "manager/commands/own_pod.h"

#include <gtest/gtest.h>

namespace dm::manager {
namespace {

using Json = nlohmann::json;

TEST(OwnPod, DownwardApiNamesComeFirstThenTheHostnameInTheOperatorNamespace) {
  auto a = own_pod_ref("driver-x", "ns-a", "host-y", "gpu-operator");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->ns, "ns-a");
  EXPECT_EQ(a->name, "driver-x");
  auto b = own_pod_ref("driver-x", "", "host-y", "gpu-operator");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->ns, "gpu-operator");
  auto c = own_pod_ref("", "", "nvidia-driver-daemonset-abcde", "gpu-operator");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "nvidia-driver-daemonset-abcde");
  EXPECT_EQ(c->source, "HOSTNAME in OPERATOR_NAMESPACE");
  EXPECT_FALSE(own_pod_ref("", "", "", "gpu-operator"));
}

TEST(OwnPod, CleanupBudgetLeavesAMarginInsideTheGracePeriod) {
  EXPECT_EQ(cleanup_budget(std::chrono::seconds(30)), std::chrono::seconds(25));
  EXPECT_EQ(cleanup_budget(std::chrono::seconds(12)), std::chrono::seconds(7));
  EXPECT_EQ(cleanup_budget(std::chrono::seconds(1)), std::chrono::seconds(2));
}

TEST(OwnPod, TheOperatorsDefaultTolerationCoversTheDefaultTaintOnly) {
  OwnPod pod;
  pod.ref = "gpu-operator/nvidia-driver-daemonset-abcde";
  pod.pod = Json::parse(R"({"spec":{"tolerations":[
      {"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]}})");
  EXPECT_FALSE(check_tolerates_taint(pod, *parse_taint(kDefaultGpuClientTaint)));
  const auto refusal = check_tolerates_taint(pod, *parse_taint("example.com/maintenance=driver:NoSchedule"));
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->message.find("gpu-operator/nvidia-driver-daemonset-abcde"), std::string::npos);
  EXPECT_NE(refusal->message.find("example.com/maintenance=driver:NoSchedule"), std::string::npos);
  EXPECT_NE(refusal->message.find("Nothing was changed"), std::string::npos);

  OwnPod bare;
  bare.pod = Json::parse(R"({"spec":{}})");
  EXPECT_TRUE(check_tolerates_taint(bare, *parse_taint(kDefaultGpuClientTaint)));
}

}  // namespace
}  // namespace dm::manager
