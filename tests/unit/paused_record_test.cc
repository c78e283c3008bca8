#include "manager/rules/paused_record.h"

#include <gtest/gtest.h>

namespace dm::manager {
namespace {

using Json = nlohmann::json;

Json node_with(const Json& labels, const Json& annotations = Json::object()) {
  return Json{{"metadata", {{"labels", labels}, {"annotations", annotations}}}};
}

TEST(PausedRecord, RoundTripsThroughTheAnnotation) {
  const PausedRecord r = {{"nvidia.com/gpu.deploy.dcgm", "true"}, {"nvidia.com/gpu.deploy.x", "custom"}};
  const Json node =
      node_with(Json::object(), {{std::string(kPausedLabelsAnnotation), paused_record_value(r)}});
  EXPECT_TRUE(has_paused_record(node));
  EXPECT_EQ(paused_record_of(node), r);
}

TEST(PausedRecord, AbsentOrMalformedIsEmpty) {
  bool malformed = true;
  EXPECT_TRUE(paused_record_of(node_with(Json::object()), &malformed).empty());
  EXPECT_FALSE(malformed);
  EXPECT_FALSE(has_paused_record(node_with(Json::object())));
  for (const char* bad : {"not json", "[1]", R"({"a":1})"}) {
    const Json node = node_with(Json::object(), {{std::string(kPausedLabelsAnnotation), bad}});
    EXPECT_TRUE(paused_record_of(node, &malformed).empty()) << bad;
    EXPECT_TRUE(malformed) << bad;
    EXPECT_TRUE(has_paused_record(node)) << bad;
  }
}

TEST(PausedRecord, MergeKeepsThePriorValueAndHealsUnrecordedMarkers) {
  const PausedRecord prior = {{"a", "true"}};
  const Json paused = {{"a", "paused-for-driver-upgrade"},
                       {"b", "paused-for-driver-upgrade"},
                       {"c", "x_paused-for-driver-upgrade"}};
  // "a" was paused by a crashed run (its snapshot is the paused value); "b" too but without a record.
  const std::map<std::string, std::string> before = {
      {"a", "paused-for-driver-upgrade"}, {"b", "paused-for-driver-upgrade"}, {"c", "x"}};
  const PausedRecord merged = merge_paused_record(prior, paused, before);
  EXPECT_EQ(merged, (PausedRecord{{"a", "true"}, {"b", "true"}, {"c", "x"}}));
}

TEST(PausedRecord, RestoresOnlyLabelsStillAtThePausedValue) {
  const PausedRecord r = {{"ours", "true"}, {"changed", "true"}, {"gone", "true"}, {"back", "custom"}};
  const Json node = node_with({{"ours", "paused-for-driver-upgrade"},
                               {"changed", "false"},
                               {"back", "custom"},
                               {"admin", "paused-for-driver-upgrade"}});
  const auto plan = decide_record_restore(r, node);
  EXPECT_EQ(plan.labels, (Json{{"ours", "true"}}));
  ASSERT_EQ(plan.changed_by_others.size(), 2U);
  EXPECT_EQ(plan.changed_by_others[0], (std::pair<std::string, std::string>{"changed", "false"}));
  EXPECT_EQ(plan.changed_by_others[1], (std::pair<std::string, std::string>{"gone", ""}));
  EXPECT_EQ(plan.already_back, std::vector<std::string>{"back"});
}

}  // namespace
}  // namespace dm::manager
