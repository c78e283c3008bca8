#include "manager/node/lease.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dm::manager
