#include "manager/label_selector.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dm::manager {
namespace {

TEST(LabelSelectorTest, ParsesAndMatches) {
  const Json labels = Json::parse(R"({"app":"web","tier":"front","env":"prod"})");
  struct Case {
    const char* selector;
    bool match;
  };
  const Case cases[] = {
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
  };
  for (const auto& c : cases) {
    auto sel = LabelSelector::parse(c.selector);
    ASSERT_TRUE(sel) << c.selector << ": " << sel.error().message;
    EXPECT_EQ(sel->matches(labels), c.match) << c.selector;
    EXPECT_EQ(sel->text(), c.selector);
  }
  EXPECT_TRUE(LabelSelector::parse("")->empty());
  EXPECT_TRUE(LabelSelector::parse("x")->matches(Json::parse(R"({"x":""})")));
  EXPECT_FALSE(LabelSelector::parse("x")->matches(Json()));
  EXPECT_TRUE(LabelSelector::parse("x!=1")->matches(Json()));
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
