#include "manager/rules/taints.h"

#include <gtest/gtest.h>

namespace dm::manager {

using Json = nlohmann::json;
using kube::Taint;
namespace {

TEST(TaintsTest, ParsesKeyValueEffect) {
  auto t = parse_taint("nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->key, "nvidia.com/gpu-driver-update");
  EXPECT_EQ(t->value, "k8s-driver-manager");
  EXPECT_EQ(t->effect, "NoSchedule");
  EXPECT_EQ(t->to_string(), "nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule");
  EXPECT_EQ(t->to_json(), Json::parse(R"({"key":"nvidia.com/gpu-driver-update","value":"k8s-driver-manager",
                                          "effect":"NoSchedule"})"));
  EXPECT_TRUE(parse_taint(kDefaultGpuClientTaint));
}

TEST(TaintsTest, ParsesKeyOnlyAndEveryEffect) {
  auto t = parse_taint("nvidia.com/gpu:NoSchedule");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->value, "");
  EXPECT_EQ(t->to_string(), "nvidia.com/gpu:NoSchedule");
  EXPECT_FALSE(t->to_json().contains("value"));
  EXPECT_TRUE(parse_taint("dedicated=gpu:PreferNoSchedule"));
  EXPECT_TRUE(parse_taint("dedicated:NoExecute"));
  EXPECT_TRUE(parse_taint("k=:NoSchedule"));  // empty value is a valid label value
}

TEST(TaintsTest, RejectsInvalidSpecsWithClearErrors) {
  struct Case {
    const char* spec;
    const char* fragment;
  };
  const Case cases[] = {
      {"nvidia.com/gpu", "missing \":<effect>\""},
      {"nvidia.com/gpu:Sometimes",
       "effect \"Sometimes\" is not one of NoSchedule, PreferNoSchedule, NoExecute"},
      {"nvidia.com/gpu:", "effect \"\" is not one of"},
      {":NoSchedule", "the key is empty"},
      {"=v:NoSchedule", "the key is empty"},
      {"Bad_Prefix/x:NoSchedule", "key prefix \"Bad_Prefix\" must be a DNS subdomain"},
      {"nvidia.com/-gpu:NoSchedule", "key name \"-gpu\""},
      {"nvidia.com/:NoSchedule", "key name \"\""},
      {"k=has space:NoSchedule", "value \"has space\""},
      {"k=a:b:NoSchedule", "more than one ':'"},
      {"k=v-:NoSchedule", "value \"v-\""},
  };
  for (const auto& c : cases) {
    auto t = parse_taint(c.spec);
    ASSERT_FALSE(t) << c.spec;
    EXPECT_NE(t.error().message.find(c.fragment), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find(std::string("\"") + c.spec + "\""), std::string::npos)
        << t.error().message;
    EXPECT_NE(t.error().message.find("key[=value]:effect"), std::string::npos);
  }
  EXPECT_FALSE(parse_taint(std::string(64, 'a') + ":NoSchedule"));
  EXPECT_TRUE(parse_taint(std::string(63, 'a') + ":NoSchedule"));
}

TEST(TaintsTest, AddAndRemoveKeepOtherTaints) {
  const Taint ours = *parse_taint("nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule");
  const Json existing = Json::parse(R"([{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"},
                                        {"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}])");
  const Json added = with_taint(existing, ours);
  ASSERT_EQ(added.size(), 3U);
  EXPECT_EQ(added[2], ours.to_json());
  EXPECT_TRUE(has_exact_taint(added, ours));
  EXPECT_EQ(with_taint(added, ours), added);  // idempotent
  EXPECT_EQ(without_taint(added, ours), existing);
  EXPECT_EQ(with_taint(Json(), ours), Json::array({ours.to_json()}));
  EXPECT_EQ(without_taint(Json(), ours), Json::array());
}

TEST(TaintsTest, SameKeyAndEffectIsNotAddedTwiceNorRemovedUnlessEqual) {
  // GPU_CLIENT_TAINT=nvidia.com/gpu:NoSchedule on a node tainted nvidia.com/gpu=present:NoSchedule.
  const Taint seed = *parse_taint("nvidia.com/gpu:NoSchedule");
  const Json existing = Json::parse(R"([{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}])");
  EXPECT_TRUE(has_taint_key_effect(existing, seed));
  EXPECT_FALSE(has_exact_taint(existing, seed));
  EXPECT_EQ(with_taint(existing, seed), existing);
  EXPECT_EQ(without_taint(existing, seed), existing);
  // Same key, other effect: a different taint.
  const Taint execute = *parse_taint("nvidia.com/gpu:NoExecute");
  EXPECT_FALSE(has_taint_key_effect(existing, execute));
  EXPECT_EQ(with_taint(existing, execute).size(), 2U);
}

}  // namespace
}  // namespace dm::manager
