// A run that has ended leaves nothing running, in the in-memory tier (tests/support/memory_scenario.h): the
// flow against an in-memory cluster that holds requests unanswered (a request stuck behind a slow server, a
// link gone silent), on the quiescent clock, so that a 5-minute retry budget costs no real time and shows as
// what it is on the scenario's clock. MemRun::after_run is the time from the run's end (the restore after a
// failure included) to the end of the last thread it started, its Summary line logged in between
// (docs/behaviour.md, When the run ends); the real binary's side of the same contract is
// tests/unit/run_end_process_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common/duration_text.h"
#include "support/memory_scenario.h"

namespace dm::test {
namespace {

using ::testing::HasSubstr;

// The contract (docs/behaviour.md): the process is gone this long after the Summary line.
constexpr Duration kExitBound = std::chrono::seconds(2);

void print_after_run(const std::string& what, const MemRun& r) {
  std::printf("%s: end of the run -> Summary and the end of its threads %s (scenario clock)\n", what.c_str(),
              format_duration(r.after_run, DurationStyle::kTenths).c_str());
}

// The user's finding, in memory: the node's GET answers 404 while the list of its pods is held. The run
// fails at once; the pod watch's list, held, ends with it instead of waiting out its 5-minute budget.
TEST(RunEndMemoryTest, AFatalAtTheStartLeavesNoListRunning) {
  MemoryScenario s("node-a");
  s.cluster().fail({.verb = "list", .path_part = "/pods", .times = -1, .hold = true});
  // Late enough that the pod watch's list is held by then (the scenario's clock stands still meanwhile).
  s.cluster().fail(
      {.verb = "get", .path_part = "/nodes/node-a", .status = 404, .delay = std::chrono::seconds(3)});

  const auto r = s.run(s.settings());

  print_after_run("fatal at the start, pods list held", r);
  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("not found: set NODE_NAME"));
  EXPECT_THAT(r.log, HasSubstr("Summary: failed in"));
  EXPECT_LT(r.after_run, kExitBound) << r.log;
}

// The run fails after its first write (a workload eviction refused) and the link then goes silent: the
// restore is the one part of the run that outlives the failure; its requests go unanswered until the
// restore's deadline, the log names what it could not restore, and only then comes the Summary - after
// which nothing of the run is left running.
TEST(RunEndMemoryTest, TheRestoreGivesUpAtItsDeadlineAndTheSummaryComesAfterIt) {
  MemoryScenario s("node-a");
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true}}});
  s.cluster().fail({.verb = "evict", .path_part = "trainer", .status = 403, .then_silent = true});

  const auto r = s.run(s.settings());

  print_after_run("fatal after the writes, link then silent", r);
  EXPECT_EQ(r.exit_code, 1) << r.log;
  const size_t left = r.log.find("Could not restore node node-a completely");
  const size_t summary = r.log.find("Summary: failed in phase");
  ASSERT_NE(left, std::string::npos) << r.log;
  ASSERT_NE(summary, std::string::npos) << r.log;
  EXPECT_LT(left, summary) << "the Summary comes after the restore";
  EXPECT_THAT(r.log, HasSubstr("gave up at the deadline")) << "the restore's requests ran to its deadline";
  EXPECT_LT(r.after_run, kExitBound) << r.log;
}

// SIGTERM while the run waits on a silent link (its operand wait, the pod watch, the progress writes, the
// lease renewal all held): the run ends 143 within the grace period's budget, and nothing outlives its
// Summary.
TEST(RunEndMemoryTest, SigtermWithTheLinkSilentEnds143AndLeavesNothingRunning) {
  MemoryScenario s("node-a");
  s.deploy({.pods = {{.name = "trainer", .request_gpu = true, .stuck = true}}});
  // The eviction is accepted, then the link goes silent while the run waits for the pod to go.
  s.cluster().fail(
      {.verb = "evict", .path_part = "trainer", .status = 0, .applied = true, .then_silent = true});
  auto settings = s.settings();
  // Long waits: the silent link, not a wait's deadline, is what the run meets.
  settings.drain_timeout = std::chrono::minutes(30);
  settings.operand_wait_timeout = std::chrono::minutes(30);
  // SIGTERM a minute into the run, on the scenario's clock: the run waits on the silent link by then.
  const CancelToken sigterm =
      CancelToken().child_until(s.clock(), Deadline::after(s.clock(), std::chrono::minutes(1)));

  const auto r = s.run(settings, sigterm);

  print_after_run("SIGTERM, link silent", r);
  EXPECT_EQ(r.exit_code, 143) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Summary: terminated by SIGTERM"));
  EXPECT_LT(r.after_run, kExitBound) << r.log;
}

}  // namespace
}  // namespace dm::test
