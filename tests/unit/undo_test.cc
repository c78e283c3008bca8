#include "manager/node/undo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "support/doubles.h"
#include "support/memory_cluster.h"

namespace dm::manager {
namespace {

// The writers the list is run with, handed to each action.
struct Writers {
  test::MemoryCluster cluster;
  test::FakeClock clock;
  NodeOps node{cluster, clock, CancelToken(), "n1"};
  TaintOps taint{cluster, clock, CancelToken(), "n1"};
  NodeWriters with() { return {node, taint}; }
};

// Actions whose key is their name, unless given one.
struct Recorder {
  std::vector<std::string> calls;
  UndoAction action(const std::string& name, bool fail = false, UndoNeed need = UndoNeed::kRequired) {
    return keyed(name, name, fail, need);
  }
  UndoAction keyed(const std::string& key, const std::string& name, bool fail = false,
                   UndoNeed need = UndoNeed::kRequired) {
    return {.key = key,
            .name = name,
            .run = [this, name, fail](const NodeWriters&) -> Status {
              calls.push_back(name);
              if (fail) return Error(name + " failed");
              return ok_status();
            },
            .need = need};
  }
};

TEST(UndoList, RunsNewestFirstAndEmpties) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("remove taint"));
  list.add(r.action("uncordon"));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  ASSERT_TRUE(list.run_all(w.with()));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_TRUE(list.empty());
}

TEST(UndoList, SameKeyIsRegisteredOnce) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.keyed("taint", "remove taint"));
  list.add(r.keyed("taint", "remove the taint, worded otherwise"));
  EXPECT_TRUE(list.contains("taint"));
  ASSERT_TRUE(list.run_all(w.with()));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"remove taint"}));  // the first registration's
}

// The text is for people: two changes described alike are still two changes, each undone.
TEST(UndoList, SameTextUnderTwoKeysRunsTwice) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.keyed("uncordon-ours", "uncordon node n1"));
  list.add(r.keyed("uncordon-anyones", "uncordon node n1"));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon node n1", "uncordon node n1"}));
  ASSERT_TRUE(list.run_all(w.with()));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon node n1", "uncordon node n1"}));
}

TEST(UndoList, RequiredFailureStopsTheSuccessPathAndKeepsTheRest) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("remove taint", /*fail=*/true));
  list.add(r.action("uncordon"));
  auto s = list.run_all(w.with());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "remove taint failed");
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint"}));
  // What failed and what was not reached are still there for the cleanup.
  EXPECT_EQ(list.names(), (std::vector<std::string>{"remove taint", "restore labels"}));
}

TEST(UndoList, OptionalFailureIsOnlyAWarningOnTheSuccessPath) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("uncordon", /*fail=*/true, UndoNeed::kOptional));
  ASSERT_TRUE(list.run_all(w.with()));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "restore labels"}));
  EXPECT_TRUE(list.empty());
}

// The uncordon failed (say, the API server was down) and then the label restore failed too: the run fails
// and its cleanup must try the uncordon again, not leave the node cordoned.
TEST(UndoList, OptionalFailureStaysForTheCleanupWhenARequiredOneFailsLater) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels", /*fail=*/true));
  list.add(r.action("remove taint"));
  list.add(r.action("uncordon", /*fail=*/true, UndoNeed::kOptional));
  ASSERT_FALSE(list.run_all(w.with()));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon", "restore labels"}));
}

// SIGTERM during the success path's restore: an optional action that fails then stops it and stays, with
// everything older, for the cleanup.
TEST(UndoList, OptionalFailureAfterSigtermStopsTheSuccessPathAndStays) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("uncordon", /*fail=*/true, UndoNeed::kOptional));
  CancelToken cancel;
  cancel.cancel();
  auto s = list.run_all(w.with(), cancel);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "uncordon failed");
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon"}));
  EXPECT_EQ(list.names(), (std::vector<std::string>{"uncordon", "restore labels"}));
}

TEST(UndoList, BestEffortRunsEverythingAndNamesWhatIsLeft) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add(r.action("remove taint", /*fail=*/true));
  list.add(r.action("uncordon"));
  test::FakeClock clock;
  auto left = list.run_best_effort(w.with(), clock, Deadline::none());
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_EQ(left, (std::vector<std::string>{"remove taint"}));
  EXPECT_TRUE(list.empty());
}

// A step upstream also has keeps upstream's failure warning: plain on the success path, "during cleanup"
// after a failure.
TEST(UndoList, UpstreamNamedFailuresUseUpstreamsWarnings) {
  Writers w;
  auto failing = [](const std::string& name) {
    return UndoAction{.key = name,
                      .name = name,
                      .run = [](const NodeWriters&) -> Status { return Error("boom"); },
                      .need = UndoNeed::kOptional,
                      .upstream_name = "uncordon node"};
  };
  {
    test::LogCapture log;
    UndoList list;
    list.add(failing("uncordon node n1"));
    ASSERT_TRUE(list.run_all(w.with()));
    EXPECT_EQ(log.text(), "warning Failed to uncordon node: boom\n");
  }
  {
    test::LogCapture log;
    UndoList list;
    list.add(failing("uncordon node n1"));
    test::FakeClock clock;
    EXPECT_EQ(list.run_best_effort(w.with(), clock, Deadline::none()),
              (std::vector<std::string>{"uncordon node n1"}));
    EXPECT_EQ(log.text(), "warning Failed to uncordon node during cleanup: boom\n");
  }
}

TEST(UndoList, BestEffortStopsStartingActionsAfterTheDeadline) {
  Writers w;
  test::FakeClock clock;
  UndoList list;
  std::vector<std::string> calls;
  list.add({.key = "restore labels", .name = "restore labels", .run = [&](const NodeWriters&) -> Status {
              calls.emplace_back("restore labels");
              return ok_status();
            }});
  list.add({.key = "uncordon", .name = "uncordon", .run = [&](const NodeWriters&) -> Status {
              calls.emplace_back("uncordon");
              clock.advance(std::chrono::seconds(30));  // a slow API server eats the budget
              return ok_status();
            }});
  const auto deadline = Deadline::after(clock, std::chrono::seconds(25));
  auto left = list.run_best_effort(w.with(), clock, deadline);
  EXPECT_EQ(calls, (std::vector<std::string>{"uncordon"}));
  EXPECT_EQ(left, (std::vector<std::string>{"restore labels"}));
}

// Steps running side by side (the taint and the cordon) register from their own threads: every action is
// kept exactly once, a key registered by two threads included, and each thread's own actions run newest
// first; what was registered before the threads started runs after all of them.
TEST(UndoList, RegistrationsFromSeveralThreadsAreEachKeptOnceAndRunNewestFirst) {
  Writers w;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::mutex mu;
  std::vector<std::string> calls;
  auto action = [&](const std::string& name) {
    return UndoAction{.key = name, .name = name, .run = [&mu, &calls, name](const NodeWriters&) -> Status {
                        const std::lock_guard lk(mu);
                        calls.push_back(name);
                        return ok_status();
                      }};
  };
  UndoList list;
  list.add(action("restore labels"));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        list.add(action("t" + std::to_string(t) + "-" + std::to_string(i)));
        list.add(action("shared"));  // the same change seen by every thread: undone once
        (void)list.contains("restore labels");
        (void)list.names();
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(list.names().size(), static_cast<size_t>(kThreads * kPerThread + 2));

  ASSERT_TRUE(list.run_all(w.with()));
  EXPECT_TRUE(list.empty());
  ASSERT_EQ(calls.size(), static_cast<size_t>(kThreads * kPerThread + 2));
  EXPECT_EQ(calls.back(), "restore labels");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "shared"), 1);
  // Within one thread, the later registration runs first.
  std::map<int, int> last_seen;  // thread -> index of its last action run so far
  for (const auto& c : calls) {
    if (c.front() != 't') continue;
    const int t = std::stoi(c.substr(1, c.find('-') - 1));
    const int i = std::stoi(c.substr(c.find('-') + 1));
    if (last_seen.contains(t)) {
      EXPECT_LT(i, last_seen[t]) << c;
    }
    last_seen[t] = i;
  }
  EXPECT_EQ(last_seen.size(), static_cast<size_t>(kThreads));
}

// A registration while the success path runs (a step still finishing beside it) is the newest: it runs
// next, not never.
TEST(UndoList, AnActionAddedWhileTheListRunsIsRunToo) {
  Writers w;
  Recorder r;
  UndoList list;
  list.add(r.action("restore labels"));
  list.add({.key = "uncordon", .name = "uncordon", .run = [&](const NodeWriters&) -> Status {
              r.calls.emplace_back("uncordon");
              list.add(r.action("remove taint"));
              return ok_status();
            }});
  ASSERT_TRUE(list.run_all(w.with()));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"uncordon", "remove taint", "restore labels"}));
  EXPECT_TRUE(list.empty());
}

// Which writers an action sends through is decided where the list is run: the success path hands it the
// run's, the cleanup its own.
TEST(UndoList, EachActionSendsThroughTheWritersTheListIsRunWith) {
  Writers run;
  Writers cleanup;
  std::vector<const NodeOps*> used;
  UndoList list;
  const auto record = [&](const NodeWriters& with) -> Status {
    used.push_back(&with.node);
    return ok_status();
  };
  list.add({.key = "a", .name = "a", .run = record});
  ASSERT_TRUE(list.run_all(run.with()));
  list.add({.key = "b", .name = "b", .run = record});
  EXPECT_TRUE(list.run_best_effort(cleanup.with(), cleanup.clock, Deadline::none()).empty());
  EXPECT_EQ(used, (std::vector<const NodeOps*>{&run.node, &cleanup.node}));
}

}  // namespace
}  // namespace dm::manager
