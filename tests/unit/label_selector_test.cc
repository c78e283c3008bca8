#include "manager/rules/label_selector.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dm::manager {

using Json = nlohmann::json;
namespace {

struct Case {
  const char* selector;
  bool match;
};

// Each selector parses, keeps its text, and matches `labels` or not as the case says.
void expect_matches(const Json& labels, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    auto sel = LabelSelector::parse(c.selector);
    ASSERT_TRUE(sel) << c.selector << ": " << sel.error().message;
    EXPECT_EQ(sel->matches(labels), c.match) << c.selector;
    EXPECT_EQ(sel->text(), c.selector);
  }
}

TEST(LabelSelectorTest, ParsesAndMatches) {
  const Json labels = Json::parse(R"({"app":"web","tier":"front","env":"prod"})");
  expect_matches(labels, {
                             {"", true},
                             {"app=web", true},
                             {"app==web", true},
                             {"app = web , tier=front", true},
                             {"app!=web", false},
                             {"app!=db", true},
                             {"missing!=x", true},
                             {"app in (web, db)", true},
                             {"app in (db)", false},
                             {"app notin (db,cache)", true},
                             {"app notin (web)", false},
                             {"missing notin (x)", true},
                             {"tier", true},
                             {"missing", false},
                             {"!missing", true},
                             {"!app", false},
                             {"app=web,!missing,env in (prod)", true},
                             {"app=web,env=dev", false},
                             {"example.com/role=gpu", false},
                         });
  EXPECT_TRUE(LabelSelector::parse("")->empty());
  EXPECT_TRUE(LabelSelector::parse("x")->matches(Json::parse(R"({"x":""})")));
  EXPECT_FALSE(LabelSelector::parse("x")->matches(Json()));
  EXPECT_TRUE(LabelSelector::parse("x!=1")->matches(Json()));
}

// Differential against Kubernetes' documented selector grammar: the examples of its documentation (labels
// concept page, and the grammar comment of its parser: the empty string is a value, "()" is the set holding
// only it, a bare key requires the key, "!key" its absence) read with the meaning given there.
TEST(LabelSelectorTest, KubernetesDocumentedExamplesMeanWhatTheGrammarSays) {
  const Json labels =
      Json::parse(R"({"environment":"production","tier":"backend","partition":"","x":"","y":"1"})");
  expect_matches(labels, {
                             {"environment = production", true},
                             {"tier != frontend", true},
                             {"environment=production,tier!=frontend", true},
                             {"environment in (production, qa)", true},
                             {"tier notin (frontend, backend)", false},
                             {"partition", true},
                             {"!partition", false},
                             {"partition,environment notin (qa)", true},
                             {"x in (foo,,baz),y,z notin ()",
                              true},             // x is "", one of the values; y exists; z is absent
                             {"x in ()", true},  // "()" is {""}
                             {"y in ()", false},
                             {"partition=", true},  // an empty value
                             {"environment=", false},
                             {"environment==production", true},
                             {"  environment  in  ( production )  ", true},
                         });
  // Not in the grammar: a value list without parentheses, an unclosed one, an empty requirement, "!" with
  // an operator, two values for one key.
  for (const char* bad : {"environment in production", "x in (a", "a,,b", "!x=y", "x=a b", "x=a=b"}) {
    EXPECT_FALSE(LabelSelector::parse(bad)) << bad;
  }
}

TEST(LabelSelectorTest, RejectsBadSyntax) {
  for (const char* bad : {"app=web,", ",", "app in web", "app in (a", "app between (a)", "=x", "!", "a b"}) {
    auto sel = LabelSelector::parse(bad);
    ASSERT_FALSE(sel) << bad;
    EXPECT_NE(sel.error().message.find(std::string("invalid label selector \"") + bad + "\""),
              std::string::npos)
        << sel.error().message;
  }
}

}  // namespace
}  // namespace dm::manager
