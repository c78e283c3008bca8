#include "kube/node_affinity.h"

#include <gtest/gtest.h>

namespace dm::kube {

using Json = nlohmann::json;
namespace {

const NodePlacement kNode{"gpu-node-1",
                          {{"nvidia.com/gpu.deploy.client", "true"},
                           {"nvidia.com/gpu.count", "8"},
                           {"nvidia.com/cuda.driver.major", "550"},
                           {"nvidia.com/gpu.product", "A100"}}};

// A pod whose required node affinity has `terms` (JSON text of the nodeSelectorTerms array).
Json pod_with_terms(const std::string& terms) {
  Json pod = {{"spec", Json::object()}};
  pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
     ["nodeSelectorTerms"] = Json::parse(terms);
  return pod;
}

// A pod with one term holding one label requirement.
Json pod_with(const std::string& requirement) {
  return pod_with_terms(R"([{"matchExpressions": [)" + requirement + "]}]");
}

bool fits(const Json& pod) {
  return pod_fits_node(pod, kNode);
}

TEST(NodeAffinityTest, NoPlacementFitsEveryNode) {
  EXPECT_TRUE(fits(Json::object()));
  EXPECT_TRUE(fits({{"spec", {{"nodeSelector", Json::object()}}}}));
  EXPECT_TRUE(fits({{"spec", {{"affinity", {{"nodeAffinity", Json::object()}}}}}}));
}

TEST(NodeAffinityTest, NodeSelectorNeedsEveryKeyWithItsValue) {
  EXPECT_TRUE(fits({{"spec", {{"nodeSelector", {{"nvidia.com/gpu.deploy.client", "true"}}}}}}));
  EXPECT_FALSE(fits({{"spec", {{"nodeSelector", {{"nvidia.com/gpu.deploy.client", "false"}}}}}}));
  EXPECT_FALSE(fits({{"spec", {{"nodeSelector", {{"absent", "true"}}}}}}));
  EXPECT_FALSE(fits(
      {{"spec",
        {{"nodeSelector", {{"nvidia.com/gpu.deploy.client", "true"}, {"nvidia.com/gpu.count", "4"}}}}}}));
}

TEST(NodeAffinityTest, InAndNotIn) {
  EXPECT_TRUE(
      fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100", "A100"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "absent", "operator": "In", "values": ["x"]})")));
  EXPECT_TRUE(
      fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["H100"]})")));
  EXPECT_FALSE(
      fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["A100"]})")));
  // NotIn matches a node without the label.
  EXPECT_TRUE(fits(pod_with(R"({"key": "absent", "operator": "NotIn", "values": ["x"]})")));
  // In and NotIn need values.
  EXPECT_FALSE(fits(pod_with(R"({"key": "absent", "operator": "NotIn", "values": []})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "In"})")));
}

TEST(NodeAffinityTest, ExistsAndDoesNotExist) {
  EXPECT_TRUE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Exists"})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "absent", "operator": "Exists"})")));
  EXPECT_TRUE(fits(pod_with(R"({"key": "absent", "operator": "DoesNotExist"})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"})")));
  // Values with Exists make the requirement invalid, and the term with it matches nothing.
  EXPECT_FALSE(
      fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Exists", "values": ["A100"]})")));
}

TEST(NodeAffinityTest, GtAndLtCompareIntegers) {
  EXPECT_TRUE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["8"]})")));
  EXPECT_TRUE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["9"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["8"]})")));
  EXPECT_TRUE(
      fits(pod_with(R"({"key": "nvidia.com/cuda.driver.major", "operator": "Gt", "values": ["+535"]})")));
  EXPECT_TRUE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["-1"]})")));
  // A label that is not an integer, or absent, does not match.
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Gt", "values": ["1"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Lt", "values": ["1"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "absent", "operator": "Lt", "values": ["1"]})")));
  // A bound that is not one integer makes the requirement invalid.
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4.5"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["+-4"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["1", "2"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": []})")));
}

TEST(NodeAffinityTest, UnknownOperatorMatchesNothing) {
  EXPECT_FALSE(
      fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Equals", "values": ["A100"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"operator": "Exists"})")));
}

TEST(NodeAffinityTest, ExpressionsOfATermAreAnded) {
  EXPECT_TRUE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Exists"},
                               {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]})")));
  EXPECT_FALSE(fits(pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Exists"},
                                {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["9"]})")));
}

TEST(NodeAffinityTest, TermsAreOred) {
  EXPECT_TRUE(fits(pod_with_terms(R"([
      {"matchExpressions": [{"key": "absent", "operator": "Exists"}]},
      {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}]}])")));
  EXPECT_FALSE(fits(pod_with_terms(R"([
      {"matchExpressions": [{"key": "absent", "operator": "Exists"}]},
      {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]}])")));
  // An invalid term matches nothing, the other terms still count.
  EXPECT_TRUE(fits(pod_with_terms(R"([
      {"matchExpressions": [{"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["many"]}]},
      {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]}])")));
}

TEST(NodeAffinityTest, EmptyTermsMatchNothing) {
  EXPECT_FALSE(fits(pod_with_terms("[]")));
  EXPECT_FALSE(fits(pod_with_terms("[{}]")));
  EXPECT_FALSE(fits(pod_with_terms(R"([{"matchExpressions": [], "matchFields": []}])")));
  // An empty term does not stop another from matching.
  EXPECT_TRUE(fits(pod_with_terms(R"([{}, {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator":
                                   "Exists"}]}])")));
  // A required affinity without its term list matches nothing either.
  Json pod = {{"spec", Json::object()}};
  pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = Json::object();
  EXPECT_FALSE(fits(pod));
}

TEST(NodeAffinityTest, MatchFieldsOnTheNodeName) {
  EXPECT_TRUE(fits(pod_with_terms(
      R"([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-1"]}]}])")));
  EXPECT_FALSE(fits(pod_with_terms(
      R"([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-2"]}]}])")));
  EXPECT_TRUE(fits(pod_with_terms(
      R"([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-node-2"]}]}])")));
  EXPECT_FALSE(fits(pod_with_terms(
      R"([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-node-1"]}]}])")));
  // One value exactly, In or NotIn only, metadata.name only.
  EXPECT_FALSE(fits(pod_with_terms(
      R"([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-1", "x"]}]}])")));
  EXPECT_FALSE(
      fits(pod_with_terms(R"([{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}])")));
  EXPECT_FALSE(fits(pod_with_terms(
      R"([{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["gpu-node-1"]}]}])")));
  // Fields and expressions of one term are ANDed.
  EXPECT_FALSE(fits(pod_with_terms(R"([{
      "matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}],
      "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-2"]}]}])")));
}

TEST(NodeAffinityTest, NodeSelectorAndAffinityBothApply) {
  Json pod = pod_with(R"({"key": "nvidia.com/gpu.product", "operator": "Exists"})");
  pod["spec"]["nodeSelector"] = {{"nvidia.com/gpu.deploy.client", "true"}};
  EXPECT_TRUE(fits(pod));
  EXPECT_TRUE(node_selector_matches(pod, kNode));
  pod["spec"]["nodeSelector"] = {{"nvidia.com/gpu.deploy.client", "false"}};
  EXPECT_FALSE(fits(pod));
  EXPECT_TRUE(required_node_affinity_matches(pod, kNode));
}

TEST(NodeAffinityTest, KeysNamedByTheRequiredAffinity) {
  const Json pod = pod_with_terms(R"([
      {"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "DoesNotExist"}]},
      {"matchExpressions": [{"key": "c", "operator": "In", "values": ["x"]}],
       "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}])");
  EXPECT_EQ(required_node_affinity_keys(pod), (std::set<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(required_node_affinity_keys(Json::object()).empty());
}

}  // namespace
}  // namespace dm::kube
