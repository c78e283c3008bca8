#include "manager/node/lease.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "support/memory_cluster.h"
#include "support/quiescent_clock.h"

namespace dm::manager {
namespace {

using Json = nlohmann::json;

Json node_with(const std::string& value) {
  return {{"metadata", {{"annotations", {{std::string(kLeaseAnnotation), value}}}}}};
}

TEST(Lease, RecordRoundTripsThroughTheAnnotation) {
  const auto renewed = std::chrono::system_clock::from_time_t(1764530000);  // whole seconds
  const LeaseRecord r{"pod gpu-operator/nvidia-driver-daemonset-x", renewed, std::chrono::seconds(60)};
  const auto back = lease_of(node_with(r.to_string()));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->holder, r.holder);
  EXPECT_EQ(back->renewed, renewed);
  EXPECT_EQ(back->duration, std::chrono::seconds(60));
}

TEST(Lease, ExpiresAfterItsDuration) {
  const auto renewed = std::chrono::system_clock::from_time_t(1764530000);
  const LeaseRecord r{"x", renewed, std::chrono::seconds(60)};
  EXPECT_FALSE(r.expired(renewed + std::chrono::seconds(59)));
  EXPECT_TRUE(r.expired(renewed + std::chrono::seconds(60)));
}

TEST(Lease, AnUnreadableOrMissingAnnotationIsNoLease) {
  EXPECT_FALSE(lease_of(Json::object()).has_value());
  EXPECT_FALSE(lease_of(node_with("not json")).has_value());
  EXPECT_FALSE(lease_of(node_with(R"({"holder":"x"})")).has_value());
  EXPECT_FALSE(
      lease_of(node_with(R"({"holder":"x","renewTime":"yesterday","leaseDurationSeconds":60})")).has_value());
}

// Written by anyone who may patch the node: a time or duration no run of ours writes is no lease (and would
// overflow the clock when compared with now).
TEST(Lease, ATimeOrDurationOutOfRangeIsNoLease) {
  const auto value = [](const std::string& renew_time, const std::string& seconds) {
    return R"({"holder":"x","renewTime":")" + renew_time + R"(","leaseDurationSeconds":)" + seconds + "}";
  };
  for (const auto& v : {value("4052-11-30T22:39:45Z", "60"), value("1900-01-01T00:00:00Z", "60"),
                        value("2026-11-30T22:39:45Z", "-1"), value("2026-11-30T22:39:45Z", "86401"),
                        value("2026-11-30T22:39:45Z", "9223372036854775807")}) {
    EXPECT_FALSE(lease_of(node_with(v)).has_value()) << v;
  }
  const auto lease = lease_of(node_with(value("2199-12-31T23:59:59Z", "86400")));
  ASSERT_TRUE(lease.has_value());
  EXPECT_FALSE(lease->expired(std::chrono::system_clock::now()));
}

TEST(Lease, HolderIsThePodWhenThereIsOne) {
  EXPECT_EQ(lease_holder_identity("gpu-operator/driver-abc", "node-1"), "pod gpu-operator/driver-abc");
  EXPECT_NE(lease_holder_identity("", "node-1").find("on node-1"), std::string::npos);
}

// The log's messages, one a line, readable while other threads log (the lease renews on a thread of its own).
class SharedLog : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    const std::lock_guard lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    text_.append(msg.payload.data(), msg.payload.size());
    text_ += '\n';
  }
  void flush_() override {}

 private:
  std::string text_;
};

// Polls `pred` (every 10 ms, for at most 30 s).
bool soon(const std::function<bool()>& pred) {
  for (int i = 0; i < 3000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// An API server outage longer than the lease: the renewal says once that the lease has lapsed, does not give
// up, and takes the lease back (still its own) when the API server answers again.
TEST(Lease, AnOutageLongerThanTheLeaseIsSaidOnceAndTheLeaseTakenBackAfterIt) {
  test::MemoryCluster cluster;
  cluster.apply({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  const test::QuiescentClock clock;  // renewals a second apart, as fast as they are made
  const auto previous = spdlog::default_logger();
  const auto sink = std::make_shared<SharedLog>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("lease", sink));
  {
    NodeLease lease(cluster, clock, "n1", "pod a/b",
                    {.duration = std::chrono::seconds(1), .renew_every = std::chrono::seconds(1)});
    ASSERT_TRUE(lease.acquire(CancelToken()));
    cluster.set_down(true);
    EXPECT_TRUE(
        soon([&] { return sink->text().find("The lease on node n1 has lapsed") != std::string::npos; }));
    const std::string lapsed = sink->text();
    EXPECT_NE(lapsed.find("Another run of driver-manager may take the node now; this run goes on"),
              std::string::npos)
        << lapsed;
    cluster.set_down(false);
    EXPECT_TRUE(
        soon([&] { return sink->text().find("Renewed the lease on node n1 again") != std::string::npos; }));
    EXPECT_TRUE(lease.held());
    EXPECT_TRUE(lease.release(CancelToken()));
  }
  spdlog::set_default_logger(previous);
  const std::string text = sink->text();
  EXPECT_EQ(occurrences(text, "has lapsed"), 1U) << text;
  EXPECT_EQ(occurrences(text, "Lost the lease"), 0U) << text;
  const auto node = cluster.find(kube::paths::node("n1"));
  ASSERT_TRUE(node.has_value());
  EXPECT_FALSE(lease_of(*node).has_value()) << "released";
}

// What a renewal carries besides the lease: the rider's annotation goes in the renewal's own patch (no
// patch of its own), the rider is told it was applied, and a rider with nothing due adds nothing.
TEST(Lease, ARenewalCarriesTheRidersAnnotationInItsOwnPatch) {
  test::MemoryCluster cluster;
  cluster.apply({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  const test::QuiescentClock clock;  // renewals a second apart, as fast as they are made
  std::mutex mu;
  bool due = true;
  std::vector<bool> told;
  {
    NodeLease lease(cluster, clock, "n1", "pod a/b", {.renew_every = std::chrono::seconds(1)});
    lease.set_renewal_rider(
        {.take = [&]() -> std::optional<std::pair<std::string, std::string>> {
           const std::lock_guard<std::mutex> lock(mu);
           if (!due) return std::nullopt;
           return std::pair<std::string, std::string>{"example.com/progress", "waiting for 1 of 2 pods"};
         },
         .done =
             [&](bool applied) {
               const std::lock_guard<std::mutex> lock(mu);
               told.push_back(applied);
               due = !applied;
             }});
    ASSERT_TRUE(lease.acquire(CancelToken()));
    EXPECT_TRUE(soon([&] {
      const std::lock_guard<std::mutex> lock(mu);
      return !told.empty();
    }));
    // The lease is the node's only writer here: its renewal carried the annotation.
    const auto node = cluster.find(kube::paths::node("n1"));
    ASSERT_TRUE(node.has_value());
    EXPECT_EQ((*node)["metadata"]["annotations"].value("example.com/progress", ""),
              "waiting for 1 of 2 pods");
    EXPECT_TRUE(lease_of(*node).has_value());
    // Nothing due: the next renewals (every second) carry the lease only.
    ASSERT_TRUE(cluster.patch(kube::paths::node("n1"), kube::PatchType::kMerge,
                              {{"metadata", {{"annotations", {{"example.com/progress", "cleared"}}}}}}));
    clock.sleep_for(std::chrono::milliseconds(2500), CancelToken());
    EXPECT_TRUE(lease.release(CancelToken()));
  }
  const std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(told, std::vector<bool>{true}) << "asked once, applied once";
  const auto node = cluster.find(kube::paths::node("n1"));
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ((*node)["metadata"]["annotations"].value("example.com/progress", ""), "cleared");
}

size_t count_starting(const std::vector<std::string>& requests, const std::string& prefix) {
  size_t n = 0;
  for (const auto& r : requests) n += r.starts_with(prefix) ? 1 : 0;
  return n;
}

// A renewal reads the node only when it does not know the record it wrote last: otherwise its write is
// guarded by that record (a JSON patch test), so another writer's change to the node is no conflict and
// costs no read, while another holder's record makes it read, see the loss, and stop renewing.
TEST(Lease, ARenewalReadsTheNodeOnlyWhenItsOwnRecordIsNotThere) {
  test::MemoryCluster cluster;
  cluster.apply({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  const test::QuiescentClock clock;  // renewals a second apart, as fast as they are made
  NodeLease lease(cluster, clock, "n1", "pod a/b", {.renew_every = std::chrono::seconds(1)});
  ASSERT_TRUE(lease.acquire(CancelToken()));
  const size_t gets_at_take = count_starting(cluster.requests(), "GET ");
  const size_t patches_at_take = count_starting(cluster.requests(), "PATCH ");
  // The first renewal reads; the next ones do not, though another writer changes the node in between.
  ASSERT_TRUE(soon([&] { return count_starting(cluster.requests(), "PATCH ") >= patches_at_take + 2; }));
  ASSERT_TRUE(cluster.patch(kube::paths::node("n1"), kube::PatchType::kMerge,
                            {{"metadata", {{"labels", {{"other", "writer"}}}}}}));
  const size_t patches_then = count_starting(cluster.requests(), "PATCH ");
  ASSERT_TRUE(soon([&] { return count_starting(cluster.requests(), "PATCH ") >= patches_then + 2; }));
  EXPECT_EQ(count_starting(cluster.requests(), "GET "), gets_at_take + 1) << "only the first renewal read";
  EXPECT_TRUE(lease.held());
  // Another holder's record: the guarded write is refused, the renewal reads and sees the loss.
  const LeaseRecord other{"pod x/y", clock.wall_now(), std::chrono::seconds(60)};
  ASSERT_TRUE(
      cluster.patch(kube::paths::node("n1"), kube::PatchType::kMerge,
                    {{"metadata", {{"annotations", {{std::string(kLeaseAnnotation), other.to_string()}}}}}}));
  EXPECT_TRUE(soon([&] { return !lease.held(); }));
  const auto node = cluster.find(kube::paths::node("n1"));
  ASSERT_TRUE(node.has_value());
  ASSERT_TRUE(lease_of(*node).has_value());
  EXPECT_EQ(lease_of(*node)->holder, "pod x/y") << "the other holder's record is left as it is";
}

// The lease's part of a first write: refused while another live run holds it, the record otherwise (also
// over an expired lease of another run). Nothing is held until the write says it was applied, and a write
// that was not applied leaves nothing to release.
TEST(Lease, TheFirstWritesPartIsRefusedWhileAnotherLiveRunHoldsIt) {
  test::MemoryCluster cluster;
  const SystemClock clock;
  NodeLease lease(cluster, clock, "n1", "pod a/b");
  const auto fold = lease.take_fold();
  const LeaseRecord other{"pod a/other", clock.wall_now(), std::chrono::seconds(60)};

  FoldedPatch refused;
  fold(node_with(other.to_string()), refused);
  ASSERT_TRUE(refused.refusal.has_value());
  EXPECT_NE(refused.refusal->message.find("pod a/other"), std::string::npos) << refused.refusal->message;
  EXPECT_TRUE(refused.body.empty());

  const LeaseRecord lapsed{"pod a/other", clock.wall_now() - std::chrono::seconds(61),
                           std::chrono::seconds(60)};
  for (const auto& node : {Json::object(), node_with(lapsed.to_string())}) {
    FoldedPatch taken;
    fold(node, taken);
    EXPECT_FALSE(taken.refusal.has_value());
    const auto mine = lease_of(taken.body);
    ASSERT_TRUE(mine.has_value()) << taken.body.dump();
    EXPECT_EQ(mine->holder, "pod a/b");
  }
  EXPECT_FALSE(lease.held());
  lease.first_write_done(NodeLease::WriteOutcome::kNotApplied);
  EXPECT_FALSE(lease.held());
  EXPECT_TRUE(lease.release(CancelToken()));
  EXPECT_TRUE(cluster.requests().empty()) << "nothing to release";
}

}  // namespace
}  // namespace dm::manager
