// How many writes a run sends, by kind, through the in-memory cluster (tests/support/memory_scenario.h):
// every node write carries everything due at that moment, and the phases' progress rides along with
// writes that happen anyway (docs/benchmarks.md, Writes, each justified).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.h"
#include "support/memory_scenario.h"

namespace dm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const std::string kPrefix = "nvidia.com/gpu.deploy.";

struct Writes {
  size_t node_patches = 0;
  size_t events = 0;
  size_t evictions = 0;
  size_t other = 0;  // any other write
};

Writes writes_of(const std::vector<std::string>& requests) {
  Writes w;
  for (const auto& r : requests) {
    if (r.starts_with("GET ")) continue;
    if (r.starts_with("PATCH /api/v1/nodes/")) {
      ++w.node_patches;
    } else if (r.starts_with("POST ") && r.ends_with("/events")) {
      ++w.events;
    } else if (r.starts_with("POST ") && r.ends_with("/eviction")) {
      ++w.evictions;
    } else if (r.find("selfsubjectaccessreviews") == std::string::npos) {
      ++w.other;
    }
  }
  return w;
}

std::string listing(const std::vector<std::string>& requests) {
  std::string out;
  for (const auto& r : requests) out += r + "\n";
  return out;
}

// The benchmark's light scenario: the operands and two GPU workloads, eviction on, no annotated client.
TEST(UninstallWrites, ALightRunWritesTheNodeTwiceAndRecordsOnlyTheSummaryEvent) {
  MemoryScenario s;
  const auto ops = default_mem_operands();
  s.deploy(
      {.operands = ops,
       .pods = {{.name = "trainer-1", .request_gpu = true}, {.name = "trainer-2", .request_gpu = true}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto requests = s.cluster().requests();
  const Writes w = writes_of(requests);
  EXPECT_EQ(w.evictions, 2U) << listing(requests);
  EXPECT_EQ(w.node_patches, 2U) << listing(requests);
  EXPECT_EQ(w.events, 1U) << listing(requests);
  EXPECT_EQ(w.other, 0U) << listing(requests);
  EXPECT_THAT(r.log, HasSubstr("Cordoning node node-a"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

void deploy_light(MemoryScenario& s) {
  s.deploy(
      {.operands = default_mem_operands(),
       .pods = {{.name = "trainer-1", .request_gpu = true}, {.name = "trainer-2", .request_gpu = true}}});
}

void expect_restored(const MemoryScenario& s) {
  for (const auto& op : default_mem_operands()) EXPECT_EQ(s.label(kPrefix + op.label), "true") << op.label;
  const auto st = s.state();
  EXPECT_FALSE(st.unschedulable);
  EXPECT_THAT(st.annotations, IsEmpty()) << "cordon, lease, paused labels and state all gone";
}

// With an annotated GPU client the run also taints the node (a write of its own, made by the client reset
// beside the first write's waits); the taint's removal rides along with the write that ends the run.
TEST(UninstallWrites, AnAnnotatedClientAddsOnlyTheTaintWrite) {
  MemoryScenario s;
  s.deploy({.operands = default_mem_operands(),
            .pods = {{.name = "agent", .gpu_client = "true"}, {.name = "trainer", .request_gpu = true}}});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto requests = s.cluster().requests();
  const Writes w = writes_of(requests);
  EXPECT_EQ(w.node_patches, 3U) << listing(requests);
  EXPECT_EQ(w.evictions, 2U) << listing(requests);
  EXPECT_EQ(w.events, 1U) << listing(requests);
  EXPECT_THAT(r.log, HasSubstr("Removing taint"));
  expect_restored(s);
}

// The write that ends the run is built from the node as read just before it; a conflict reads the node
// again and builds it again, and says each thing it did once.
TEST(UninstallWrites, AConflictOnTheEndingWriteIsDecidedAgainFromAFreshRead) {
  MemoryScenario s;
  deploy_light(s);
  s.cluster().fail({.verb = "patch", .body_part = "\"unschedulable\":null", .status = 409});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  expect_restored(s);
  EXPECT_EQ(count(r.log, "Uncordoning node node-a"), 1U) << r.log;
  EXPECT_EQ(count(r.log, "Rescheduling all GPU clients"), 1U) << r.log;
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 3U);
}

// A refused ending write: each change is undone on its own, then the lease released on its own.
TEST(UninstallWrites, ARefusedEndingWriteUndoesEachChangeOnItsOwn) {
  MemoryScenario s;
  deploy_light(s);
  s.cluster().fail({.verb = "patch", .body_part = "\"unschedulable\":null", .status = 422});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("undoing each change on its own"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  expect_restored(s);
}

// An ending write applied but unanswered: undoing each change on its own finds nothing left to do, and
// nothing is sent twice as it was.
TEST(UninstallWrites, AnEndingWriteAppliedButUnansweredIsNotUndoneTwice) {
  MemoryScenario s;
  deploy_light(s);
  s.cluster().fail({.verb = "patch", .body_part = "\"unschedulable\":null", .status = 0, .applied = true});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  expect_restored(s);
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 2U) << "no write after the applied one";
}

// The first write carries the lease, the label pause with its record and the state, and the cordon.
TEST(UninstallWrites, TheFirstWriteTakesTheLeaseWithThePauseAndTheCordon) {
  MemoryScenario s;
  deploy_light(s);
  // Refused once: the first write is seen, and decided again from a fresh read.
  s.cluster().fail({.verb = "patch", .body_part = "\"unschedulable\":true", .status = 409});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(count(r.log, "Cordoning node node-a"), 1U) << r.log;
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 3U);
  expect_restored(s);
}

// A failure after the first write restores everything it changed: labels, cordon, lease, records.
TEST(UninstallWrites, AFailureAfterTheFirstWriteRestoresEverythingItChanged) {
  MemoryScenario s;
  deploy_light(s);
  s.cluster().fail({.verb = "evict", .path_part = "trainer-1", .status = 403, .times = -1});
  auto settings = s.settings();
  settings.enable_auto_drain = false;

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Cordoning node node-a"));
  EXPECT_THAT(r.log, HasSubstr("Uncordoning node node-a"));
  expect_restored(s);
}

// A first write the API server refuses changed nothing: nothing is undone, and the node stays as it was.
TEST(UninstallWrites, ARefusedFirstWriteLeavesNothingToUndo) {
  MemoryScenario s;
  deploy_light(s);
  s.cluster().fail({.verb = "patch", .body_part = "gpu-driver-manager.lease", .status = 422});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, Not(HasSubstr("Performing cleanup on failure")));
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 1U);
  expect_restored(s);
}

// A first write that may have been applied (no answer, then server errors until SIGTERM ends its retries):
// the cleanup looks at the node. Applied (the run's lease is there), it is undone; not applied, nothing is.
TEST(UninstallWrites, AFirstWriteWithoutAnAnswerIsUndoneOnlyWhenItWasApplied) {
  for (const bool applied : {true, false}) {
    MemoryScenario s;
    deploy_light(s);
    const std::string first = "gpu-driver-manager.paused-labels";
    s.cluster().fail({.verb = "patch", .body_part = first, .status = 0, .times = 1, .applied = applied});
    s.cluster().fail({.verb = "patch", .body_part = first, .status = 500, .times = -1});
    CancelToken sigterm;
    std::thread killer([&] {
      // The second attempt has failed: the run waits before the third. The cleanup's writes go through.
      eventually([&] { return s.requests_with("PATCH /api/v1/nodes/") >= 2; }, kPatientSeconds);
      s.cluster().clear_faults();
      sigterm.cancel();
    });

    const auto r = s.run(s.settings(), sigterm);
    killer.join();

    EXPECT_EQ(r.exit_code, 143) << r.log;
    expect_restored(s);
    if (HasFailure()) std::cerr << r.log;
    EXPECT_EQ(r.log.find("did not reach node node-a: nothing to restore") != std::string::npos, !applied)
        << r.log;
  }
}

}  // namespace
}  // namespace dm::test
