#include "manager/commands/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/log.h"
#include "manager/commands/phase_tally.h"
#include "manager/commands/progress_reporter.h"
#include "support/doubles.h"
#include "support/memory_cluster.h"

namespace dm::manager {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// The fake clock's wall time starts at 2026-11-30T22:00:00Z and moves with it.

TEST(RunProgress, PhasesTakeTheTimeBetweenTheirBoundaries) {
  test::FakeClock clock;
  RunProgress p(clock);
  EXPECT_FALSE(p.current());
  clock.advance(milliseconds(300));  // before the first phase: counted in the total only
  p.begin(Phase::kPauseOperands);
  clock.advance(milliseconds(1200));
  p.begin(Phase::kEvictWorkloads);
  EXPECT_EQ(p.current(), Phase::kEvictWorkloads);
  clock.advance(milliseconds(800));
  p.begin(Phase::kRestore);
  clock.advance(milliseconds(50));
  p.end();
  EXPECT_FALSE(p.current());

  const auto phases = p.phases();
  ASSERT_EQ(phases.size(), 3U);
  EXPECT_EQ(phases[0].phase, Phase::kPauseOperands);
  EXPECT_EQ(phases[0].took, milliseconds(1200));
  EXPECT_EQ(phases[1].phase, Phase::kEvictWorkloads);
  EXPECT_EQ(phases[1].took, milliseconds(800));
  EXPECT_EQ(phases[2].took, milliseconds(50));
  EXPECT_EQ(
      p.summary("node prepared for the driver installation"),
      "Summary: node prepared for the driver installation in 2.3s: nothing paused, evicted or unloaded; "
      "phases: pause-operands 1.2s, evict-workloads 0.8s, restore 0.0s");
}

TEST(RunProgress, SummaryCountsWhatEachPhaseDid) {
  test::FakeClock clock;
  RunProgress p(clock);
  p.begin(Phase::kPauseOperands);
  p.add_paused_labels(8);
  p.add_pods_gone(Phase::kPauseOperands, 4);
  p.add_gpu_clients_reset(1);  // side by side with the operands, counted apart
  clock.advance(seconds(65));
  p.begin(Phase::kEvictWorkloads);
  p.add_pods_gone(Phase::kEvictWorkloads, 2);
  p.begin(Phase::kUnloadDriver);
  p.add_modules_unloaded(5);
  clock.advance(milliseconds(450));
  // A failure in the unload: the summary is written while the phase is still open.
  EXPECT_EQ(
      p.summary("failed in phase unload-driver"),
      "Summary: failed in phase unload-driver in 1m5.4s: paused 8 operand labels, stopped 4 operand pods, "
      "reset 1 GPU client, evicted 2 GPU pods, unloaded 5 kernel modules; phases: pause-operands 1m5.0s, "
      "evict-workloads 0.0s, unload-driver 0.4s");
}

// The GPU workloads are evicted side by side with the operands too: counted under their own words, with no
// evict-workloads phase of their own when nothing is left for it (no drain, no DRA).
TEST(RunProgress, WorkloadsEvictedDuringPauseOperandsAreCountedApartWithoutTheirPhase) {
  test::FakeClock clock;
  RunProgress p(clock);
  p.begin(Phase::kPauseOperands);
  p.add_paused_labels(4);
  clock.advance(milliseconds(2300));
  p.add_pods_gone(Phase::kPauseOperands, 4);
  p.add_gpu_clients_reset(10);
  p.add_pods_gone(Phase::kEvictWorkloads, 20);
  p.begin(Phase::kUnloadDriver);
  p.add_modules_unloaded(3);
  clock.advance(milliseconds(100));
  p.begin(Phase::kRestore);
  clock.advance(milliseconds(100));
  p.end();
  EXPECT_EQ(p.summary("node prepared for the driver installation"),
            "Summary: node prepared for the driver installation in 2.5s: paused 4 operand labels, stopped 4 "
            "operand pods, reset 10 GPU clients, evicted 20 GPU pods, unloaded 3 kernel modules; phases: "
            "pause-operands 2.3s, unload-driver 0.1s, restore 0.1s");
}

TEST(RunProgress, AnnotationNamesThePhaseItsStartAndThePodsAWaitStillWaitsFor) {
  test::FakeClock clock;
  RunProgress p(clock);
  clock.advance(seconds(2));
  p.begin(Phase::kPauseOperands);
  EXPECT_EQ(p.annotation_value(),
            "phase=pause-operands; since=2026-11-30T22:00:02Z; run started=2026-11-30T22:00:00Z");

  WaitStatus w{"GPU operand pods to shut down", {"op/dcgm-1 (nvidia-dcgm)"}, 4, seconds(20), seconds(40)};
  p.set_waiting(w);
  EXPECT_EQ(p.annotation_value(),
            "phase=pause-operands; since=2026-11-30T22:00:02Z; waiting for 1 of 4 pods: op/dcgm-1; run "
            "started=2026-11-30T22:00:00Z");

  // A new phase forgets the wait of the last one.
  clock.advance(seconds(61));
  p.begin(Phase::kEvictWorkloads);
  EXPECT_EQ(p.annotation_value(),
            "phase=evict-workloads; since=2026-11-30T22:01:03Z; run started=2026-11-30T22:00:00Z");

  // At most three pods are named: `kubectl describe node` shows only the first 140 characters.
  w.remaining = {"a/1 (terminating)", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7"};
  p.set_waiting(w);
  const std::string v = p.annotation_value();
  EXPECT_EQ(
      v,
      "phase=evict-workloads; since=2026-11-30T22:01:03Z; waiting for 7 of 7 pods: a/1, a/2, a/3 and 4 more; "
      "run started=2026-11-30T22:00:00Z");
}

size_t node_patches(const test::MemoryCluster& cluster) {
  size_t n = 0;
  for (const auto& r : cluster.requests()) n += r.starts_with("PATCH /api/v1/nodes/") ? 1 : 0;
  return n;
}

// A long wait's refresh of the state annotation: a patch of its own, until the lease's renewal rider is
// handed out; then it waits for the renewal, which takes it once (the newest state) and clears it when
// applied. A phase boundary is still written at once.
TEST(ProgressReporter, ALongWaitsRefreshGoesWithTheLeaseRenewalOnceItIsHandedOut) {
  test::MemoryCluster cluster;
  cluster.apply({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  test::FakeClock clock;
  KnownNode known;
  const WaitStatus waiting{
      "GPU operand pods to shut down", {"op/dcgm-1 (nvidia-dcgm)"}, 4, seconds(20), seconds(40)};
  {
    ProgressReporter alone(cluster, clock, "n1", known);
    alone.begin(Phase::kPauseOperands, StateWrite::kNow);
    EXPECT_EQ(node_patches(cluster), 1U);
    alone.on_wait(waiting, false);
    alone.stop();
    EXPECT_EQ(node_patches(cluster), 2U) << "without a lease to ride with, the refresh is a patch";
  }
  ProgressReporter reporter(cluster, clock, "n1", known);
  const RenewalRider rider = reporter.renewal_rider();
  EXPECT_FALSE(rider.take().has_value()) << "nothing due yet";
  reporter.begin(Phase::kPauseOperands, StateWrite::kNow);
  EXPECT_EQ(node_patches(cluster), 3U) << "a phase boundary is written at once";
  reporter.on_wait(waiting, false);
  const auto carried = rider.take();
  ASSERT_TRUE(carried.has_value());
  EXPECT_EQ(carried->first, std::string(kStateAnnotation));
  EXPECT_THAT(carried->second, HasSubstr("waiting for 1 of 4 pods: op/dcgm-1"));
  rider.done(false);
  EXPECT_TRUE(rider.take().has_value()) << "a renewal that failed leaves it due";
  rider.done(true);
  EXPECT_FALSE(rider.take().has_value()) << "carried";
  reporter.stop();
  EXPECT_EQ(node_patches(cluster), 3U) << "the refresh cost no patch of its own";
}

TEST(RunProgress, EveryPhaseHasAName) {
  for (auto ph : {Phase::kPauseOperands, Phase::kEvictWorkloads, Phase::kUnloadDriver,
                  Phase::kCleanDriverRoot, Phase::kWaitMofed, Phase::kRestore, Phase::kCleanupOnFailure}) {
    EXPECT_THAT(std::string(phase_name(ph)), Not(HasSubstr("unknown")));
  }
  EXPECT_EQ(phase_name(Phase::kUnloadDriver), "unload-driver");
}

TEST(WaitProgress, LogsTheProgressLineAtASteadyCadenceWithCountsNamesAndTimes) {
  test::FakeClock clock;
  test::LogCapture log;
  std::vector<std::pair<size_t, bool>> seen;  // remaining, started
  WaitObserver observer = [&](const WaitStatus& s, bool started) {
    seen.emplace_back(s.remaining.size(), started);
  };
  WaitProgress w(clock, "GPU pods to be evicted", Deadline::after(clock, seconds(60)), seconds(5), &observer);

  w.update({"wl/a", "wl/b", "wl/c"});  // the start: no line yet
  clock.advance(seconds(3));
  w.update({"wl/a", "wl/b"});
  clock.advance(seconds(2));
  w.update({"wl/b (eviction refused: pdb)"});  // 5 s: a line
  clock.advance(seconds(4));
  w.update({"wl/b (eviction refused: pdb)"});
  clock.advance(seconds(1));
  w.update({"wl/b (eviction refused: pdb)"});  // 10 s: a line

  EXPECT_EQ(
      log.text(),
      "info Still waiting for GPU pods to be evicted: 1 of 3 left: wl/b (eviction refused: pdb) (elapsed 5s, "
      "55s left)\n"
      "info Still waiting for GPU pods to be evicted: 1 of 3 left: wl/b (eviction refused: pdb) (elapsed "
      "10s, "
      "50s left)\n");
  EXPECT_EQ(seen, (std::vector<std::pair<size_t, bool>>{{3, true}, {1, false}, {1, false}}));
}

TEST(WaitProgress, ANameListIsCutAfterTenAndNoDeadlineIsSaid) {
  WaitStatus s{"operands", {}, 0, seconds(125), std::nullopt};
  for (int i = 0; i < 12; ++i) s.remaining.push_back("ns/p" + std::to_string(i));
  EXPECT_EQ(
      wait_progress_line(s),
      "Still waiting for operands: 12 of 12 left: ns/p0, ns/p1, ns/p2, ns/p3, ns/p4, ns/p5, ns/p6, ns/p7, "
      "ns/p8, ns/p9 and 2 more (elapsed 2m5s, no time limit)");
}

TEST(Format, Timestamps) {
  EXPECT_EQ(rfc3339(std::chrono::system_clock::time_point(seconds(1796076000))), "2026-11-30T22:00:00Z");
}

}  // namespace

// The tally compares the pods and modules at each phase boundary with the last: an operand pod that left
// during pause-operands is "stopped", an annotated client "reset", a GPU workload (by UID) "evicted" whatever
// phase it left in, the modules gone "unloaded".
TEST(PhaseTally, CountsWhatLeftEachPhaseAsWhatItIs) {
  test::FakeClock clock;
  RunProgress p(clock);
  PhaseTally tally;
  EvictedPods evicted;
  const auto pod = [](const std::string& uid, bool client) {
    nlohmann::json j = {{"metadata", {{"uid", uid}, {"name", uid}, {"namespace", "ns"}}}};
    if (client) j["metadata"]["annotations"]["nvidia.com/gpu.client"] = "true";
    return std::make_shared<const nlohmann::json>(std::move(j));
  };
  tally.count(p, {pod("op", false), pod("agent", true), pod("train", false), pod("stays", false)}, 5,
              evicted);
  p.begin(Phase::kPauseOperands);
  evicted.workloads.insert("train");
  tally.count(p, {pod("stays", false)}, 5, evicted);
  p.begin(Phase::kUnloadDriver);
  tally.count(p, {pod("stays", false)}, 0, evicted);
  p.begin(Phase::kRestore);
  EXPECT_THAT(p.summary("done"),
              ::testing::HasSubstr("stopped 1 operand pod, reset 1 GPU client, evicted 1 GPU "
                                   "pod, unloaded 5 kernel modules"));
}

}  // namespace dm::manager
