// How many writes a run sends, by kind, through the in-memory cluster (tests/support/memory_scenario.h):
// every node write carries everything due at that moment, and the phases' progress rides along with
// writes that happen anyway (docs/benchmarks.md, Writes, each justified).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/memory_scenario.h"

namespace dm::test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

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
  EXPECT_EQ(w.node_patches, 4U) << listing(requests);
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
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 5U);
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
  EXPECT_EQ(writes_of(s.cluster().requests()).node_patches, 4U) << "no write after the applied one";
}

}  // namespace
}  // namespace dm::test
