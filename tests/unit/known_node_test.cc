#include "manager/node/known_node.h"

#include <gtest/gtest.h>

namespace dm::manager {
namespace {

using Json = nlohmann::json;

Json node_at(const std::string& rv, const std::string& mark = "") {
  return {{"metadata", {{"name", "n"}, {"resourceVersion", rv}, {"labels", {{"mark", mark}}}}}};
}

std::string mark_of(const KnownNode& k) {
  const auto c = k.copy();
  return c ? (*c)["metadata"]["labels"]["mark"].get<std::string>() : std::string("<none>");
}

TEST(KnownNode, HoldsNothingUntilANodeIsSeen) {
  KnownNode k;
  EXPECT_FALSE(k.copy().has_value());
  k.remember(node_at("10", "a"));
  EXPECT_EQ(mark_of(k), "a");
}

TEST(KnownNode, ANewerVersionReplacesTheCopyAndAnOlderOneDoesNot) {
  KnownNode k;
  k.remember(node_at("10", "a"));
  k.remember(node_at("12", "b"));
  EXPECT_EQ(mark_of(k), "b");
  // The answer to a write sent earlier arrives last: the newer copy stays.
  k.remember(node_at("11", "late"));
  EXPECT_EQ(mark_of(k), "b");
  // Numbers, not text: "9" < "10".
  KnownNode n;
  n.remember(node_at("10", "ten"));
  n.remember(node_at("9", "nine"));
  EXPECT_EQ(mark_of(n), "ten");
}

TEST(KnownNode, AVersionThatIsNotANumberAlwaysReplaces) {
  KnownNode k;
  k.remember(node_at("50", "a"));
  k.remember(node_at("opaque", "b"));
  EXPECT_EQ(mark_of(k), "b");
  k.remember(node_at("7", "c"));
  EXPECT_EQ(mark_of(k), "c");
}

}  // namespace
}  // namespace dm::manager
