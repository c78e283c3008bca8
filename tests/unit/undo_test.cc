#include "manager/undo.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/doubles.h"

namespace dm::manager {
namespace {

struct Recorder {
  std::vector<std::string> calls;
  UndoAction action(const std::string& name, bool fail = false, bool required = true) {
    return {name,
            [this, name, fail]() -> Status {
              calls.push_back(name);
              if (fail) return Error(name + " failed");
              return ok_status();
            },
            required};
  }
};

TEST(UndoList, RunsNewestFirstAndEmpties) {
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("remove taint"));
  list.add(r.action("uncordon"));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  ASSERT_TRUE(list.run_all());
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_TRUE(list.empty());
}

TEST(UndoList, SameNameIsRegisteredOnce) {
  Recorder r;
  UndoList list;
  list.add(r.action("remove taint"));
  list.add(r.action("remove taint"));
  ASSERT_TRUE(list.run_all());
  EXPECT_EQ(r.calls.size(), 1U);
}

TEST(UndoList, RequiredFailureStopsTheSuccessPathAndKeepsTheRest) {
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("remove taint", /*fail=*/true));
  list.add(r.action("uncordon"));
  auto s = list.run_all();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "remove taint failed");
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint"}));
  // What failed and what was not reached are still there for the cleanup.
  EXPECT_EQ(list.names(), (std::vector<std::string>{"remove taint", "restore labels"}));
}

TEST(UndoList, OptionalFailureIsOnlyAWarningOnTheSuccessPath) {
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("uncordon", /*fail=*/true, /*required=*/false));
  ASSERT_TRUE(list.run_all());
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "restore labels"}));
  EXPECT_TRUE(list.empty());
}

// The uncordon failed (say, the API server was down) and then the label restore failed too: the run fails
// and its cleanup must try the uncordon again, not leave the node cordoned.
TEST(UndoList, OptionalFailureStaysForTheCleanupWhenARequiredOneFailsLater) {
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels", /*fail=*/true));
  list.add(r.action("remove taint"));
  list.add(r.action("uncordon", /*fail=*/true, /*required=*/false));
  ASSERT_FALSE(list.run_all());
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon", "restore labels"}));
}

// SIGTERM during the success path's restore: an optional action that fails then stops it and stays, with
// everything older, for the cleanup.
TEST(UndoList, OptionalFailureAfterSigtermStopsTheSuccessPathAndStays) {
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("uncordon", /*fail=*/true, /*required=*/false));
  CancelToken cancel;
  cancel.cancel();
  auto s = list.run_all(cancel);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "uncordon failed");
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon"}));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon", "restore labels"}));
}

TEST(UndoList, BestEffortRunsEverythingAndNamesWhatIsLeft) {
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("remove taint", /*fail=*/true));
  list.add(r.action("uncordon"));
  test::FakeClock clock;
  auto left = list.run_best_effort(clock, Deadline::none());
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_EQ(left, (std::vector<std::string>{"remove taint"}));
  EXPECT_TRUE(list.empty());
}

// A step upstream also has keeps upstream's failure warning: plain on the success path, "during cleanup"
// after a failure.
TEST(UndoList, UpstreamNamedFailuresUseUpstreamsWarnings) {
  auto failing = [](const std::string& name) {
    return UndoAction{name, []() -> Status { return Error("boom"); }, /*required=*/false, "uncordon node"};
  };
  {
    test::LogCapture log;
    UndoList list;
    list.add(failing("uncordon node n1"));
    ASSERT_TRUE(list.run_all());
    EXPECT_EQ(log.text(), "warning Failed to uncordon node: boom\n");
  }
  {
    test::LogCapture log;
    UndoList list;
    list.add(failing("uncordon node n1"));
    test::FakeClock clock;
    EXPECT_EQ(list.run_best_effort(clock, Deadline::none()), (std::vector<std::string>{"uncordon node n1"}));
    EXPECT_EQ(log.text(), "warning Failed to uncordon node during cleanup: boom\n");
  }
}

TEST(UndoList, BestEffortStopsStartingActionsAfterTheDeadline) {
  test::FakeClock clock;
  UndoList list;
  std::vector<std::string> calls;
  list.add({"restore labels", [&]() -> Status {
              calls.emplace_back("restore labels");
              return ok_status();
            }});
  list.add({"uncordon", [&]() -> Status {
              calls.emplace_back("uncordon");
              clock.advance(std::chrono::seconds(30));  // a slow API server eats the budget
              return ok_status();
            }});
  const auto deadline = Deadline::after(clock, std::chrono::seconds(25));
  auto left = list.run_best_effort(clock, deadline);
  EXPECT_EQ(calls, (std::vector<std::string>{"uncordon"}));
  EXPECT_EQ(left, (std::vector<std::string>{"restore labels"}));
}

}  // namespace
}  // namespace dm::manager
