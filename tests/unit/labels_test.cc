#include "manager/rules/labels.h"

#include <gtest/gtest.h>

namespace dm::manager {
namespace {

struct Row {
  const char* snapshot;
  const char* paused;
  const char* upstream_restored;
  const char* restored;  // our policy
};

// Upstream's pause/restore table, plus the column of our restore policy (docs/behaviour.md, Pausing and
// restoring operand labels).
const Row kRows[] = {
    {"", "", "", ""},
    {"true", "paused-for-driver-upgrade", "true", "true"},
    {"false", "false", "false", "false"},
    {"paused-for-driver-upgrade", "paused-for-driver-upgrade", "true", "true"},
    {"pre-installed", "pre-installed_paused-for-driver-upgrade", "pre-installed", "pre-installed"},
    {"on_paused-for-driver-upgrade", "on_paused-for-driver-upgrade", "on", "on"},
    {"a_b", "a_b_paused-for-driver-upgrade", "a_b", "a_b"},
    {"x_paused-for-driver-upgrade_y", "x_paused-for-driver-upgrade_y", "x_y", "x_y"},
    {"_foo_", "_foo__paused-for-driver-upgrade", "foo", "_foo_"},
};

TEST(LabelsTest, PauseFollowsSpecTable) {
  for (const auto& r : kRows) EXPECT_EQ(pause_value(r.snapshot), r.paused) << "snapshot=" << r.snapshot;
}

TEST(LabelsTest, UpstreamRestoreFollowsSpecTable) {
  for (const auto& r : kRows) {
    EXPECT_EQ(upstream_restore_value(r.snapshot), r.upstream_restored) << "snapshot=" << r.snapshot;
  }
}

TEST(LabelsTest, RestorePolicyWritesBackSnapshotAndHealsOnlyPausedValues) {
  for (const auto& r : kRows) EXPECT_EQ(restore_value(r.snapshot), r.restored) << "snapshot=" << r.snapshot;
}

TEST(LabelsTest, RestoreOfPausedValueGivesSnapshotBack) {
  // What we pause, our restore undoes exactly (for every value not already paused).
  for (const char* v : {"true", "false", "pre-installed", "a_b", "_foo_", "x"}) {
    EXPECT_EQ(upstream_restore_value(pause_value(v)), std::string(v) == "_foo_" ? "foo" : v) << v;
    EXPECT_EQ(restore_value(v), v) << v;
  }
}

TEST(LabelsTest, UpstreamRestoreRemovesEveryMarkerOccurrence) {
  EXPECT_EQ(upstream_restore_value("paused-for-driver-upgrade_paused-for-driver-upgrade"), "");
  EXPECT_EQ(upstream_restore_value("a_paused-for-driver-upgrade_paused-for-driver-upgrade"), "a");
  EXPECT_EQ(upstream_restore_value("__"), "");
}

TEST(LabelsTest, PausedValueDetectionAndWritePolicy) {
  EXPECT_TRUE(is_paused_value("paused-for-driver-upgrade"));
  EXPECT_TRUE(is_paused_value("x_paused-for-driver-upgrade"));
  EXPECT_FALSE(is_paused_value("paused"));
  EXPECT_FALSE(should_write_label(""));
  EXPECT_TRUE(should_write_label("false"));
}

}  // namespace
}  // namespace dm::manager
