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

size_t first_index(const std::vector<std::string>& requests, const std::string& start,
                   const std::string& end) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].starts_with(start) && requests[i].ends_with(end)) return i;
  }
  return requests.size();
}

void deploy_with_client(MemoryScenario& s) {
  s.deploy({.operands = default_mem_operands(),
            .pods = {{.name = "agent", .gpu_client = "true"}, {.name = "trainer", .request_gpu = true}}});
}

// With an annotated GPU client found before the first write, that write taints the node too (with the
// annotation that says the run added it); the taint's removal rides along with the write that ends the run.
// No write of the node comes between them: the taint was on before the first eviction.
TEST(UninstallWrites, AClientFoundBeforeTheFirstWriteIsKeptOffByThatWrite) {
  MemoryScenario s;
  deploy_with_client(s);

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto requests = s.cluster().requests();
  const Writes w = writes_of(requests);
  EXPECT_EQ(w.node_patches, 2U) << listing(requests);
  EXPECT_EQ(w.evictions, 2U) << listing(requests);
  EXPECT_EQ(w.events, 1U) << listing(requests);
  EXPECT_LT(first_index(requests, "PATCH /api/v1/nodes/", ""), first_index(requests, "POST ", "/eviction"))
      << listing(requests);
  EXPECT_EQ(count(r.log, "Tainting node node-a with nvidia.com/gpu:NoSchedule"), 1U) << r.log;
  EXPECT_LT(r.log.find("Tainting node node-a"), r.log.find("evicting pod workloads/agent")) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Removing taint nvidia.com/gpu:NoSchedule (added by driver-manager)"));
  expect_restored(s);
  EXPECT_THAT(s.state().taints, IsEmpty());
}

// A conflict on the first write decides it again from a fresh read, the taint with the rest: written once,
// said once.
TEST(UninstallWrites, AConflictOnTheFirstWriteDecidesTheTaintAgain) {
  MemoryScenario s;
  deploy_with_client(s);
  s.cluster().fail({.verb = "patch", .body_part = "gpu-driver-manager.tainted\":\"", .status = 409});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 3U) << listing(s.cluster().requests());
  EXPECT_EQ(count(r.log, "Tainting node node-a"), 1U) << r.log;
  EXPECT_EQ(count(r.log, "Cordoning node node-a"), 1U) << r.log;
  expect_restored(s);
  EXPECT_THAT(s.state().taints, IsEmpty());
}

// A first write that went through with the taint but whose answer was lost is sent again, decided from a
// fresh read: the taint found there is the one it added, said once, and the reset writes no taint of its own.
TEST(UninstallWrites, ATaintAddedByAnUnansweredFirstWriteIsTakenAsAdded) {
  MemoryScenario s;
  deploy_with_client(s);
  s.cluster().fail(
      {.verb = "patch", .body_part = "gpu-driver-manager.tainted\":\"", .status = 0, .applied = true});

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 3U) << listing(s.cluster().requests());
  EXPECT_EQ(count(r.log, "Tainting node node-a"), 1U) << r.log;
  EXPECT_THAT(r.log, Not(HasSubstr("already carries taint")));
  expect_restored(s);
  EXPECT_THAT(s.state().taints, IsEmpty());
}

// A taint with the key and effect of GPU_CLIENT_TAINT that someone else put on the node keeps the clients
// off: the first write adds none, and the end leaves it as it was.
TEST(UninstallWrites, SomeoneElsesTaintIsNotAddedByTheFirstWrite) {
  MemoryScenario s;
  deploy_with_client(s);
  auto node = s.node_json();
  const auto pool = nlohmann::json::array({{{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}});
  node["spec"]["taints"] = pool;
  s.cluster().apply(node);

  const auto r = s.run(s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 2U) << listing(s.cluster().requests());
  EXPECT_THAT(r.log, Not(HasSubstr("Tainting node")));
  EXPECT_THAT(r.log, HasSubstr("not adding a second one"));
  expect_restored(s);
  EXPECT_EQ(s.state().taints, pool);
}

// A client bound after the first write (the workloads' eviction under way) is found by the look for late
// arrivals: the taint it needs is a write of its own, made before the client is evicted.
TEST(UninstallWrites, ATaintNeededOnlyAfterTheFirstWriteIsAWriteOfItsOwn) {
  MemoryScenario s;
  s.deploy({.operands = default_mem_operands(),
            .pods = {{.name = "trainer", .request_gpu = true, .terminate_after = "0.5"}}});
  std::thread late([&s] {
    if (eventually([&] { return s.requests_with("/pods/trainer/eviction") > 0; }, 30,
                   std::chrono::milliseconds(2))) {
      s.deploy_pod({.name = "agent", .gpu_client = "true"});
    }
  });

  const auto r = s.run(s.settings());
  late.join();

  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto requests = s.cluster().requests();
  // The first write, the state of the phase the late arrival opens, the taint, the end.
  EXPECT_EQ(writes_of(requests).node_patches, 4U) << listing(requests);
  ASSERT_THAT(r.log, HasSubstr("Tainting node node-a"));
  EXPECT_LT(r.log.find("Tainting node node-a"), r.log.find("evicting pod workloads/agent")) << r.log;
  expect_restored(s);
  EXPECT_THAT(s.state().taints, IsEmpty());
}

// A failure after the first write takes off the taint it added, with everything else it changed.
TEST(UninstallWrites, AFailureAfterTheFirstWriteRemovesTheTaintItAdded) {
  MemoryScenario s;
  deploy_with_client(s);
  s.cluster().fail({.verb = "evict", .path_part = "trainer", .status = 403, .times = -1});
  auto settings = s.settings();
  settings.enable_auto_drain = false;

  const auto r = s.run(settings);

  ASSERT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Tainting node node-a"));
  EXPECT_THAT(r.log, HasSubstr("Removing taint nvidia.com/gpu:NoSchedule (added by driver-manager)"));
  expect_restored(s);
  EXPECT_THAT(s.state().taints, IsEmpty());
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
    deploy_with_client(s);  // the first write carries the taint too
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
    EXPECT_THAT(s.state().taints, IsEmpty());
    if (HasFailure()) std::cerr << r.log;
    EXPECT_EQ(r.log.find("did not reach node node-a: nothing to restore") != std::string::npos, !applied)
        << r.log;
  }
}

}  // namespace
}  // namespace dm::test
