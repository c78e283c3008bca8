// The lease annotation's value (manager/lease), as anyone allowed to patch the node may write it.
// Round trip: a lease that reads back is written again as the same lease.
#include "fuzz_support.h"
#include "manager/node/lease.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace m = dm::manager;
  const auto node = [](std::string_view value) {
    return nlohmann::json{{"metadata", {{"annotations", {{std::string(m::kLeaseAnnotation), value}}}}}};
  };
  const std::string_view value = dm::fuzz::text(data, size);
  const auto lease = m::lease_of(node(value));
  if (!lease) return 0;
  (void)lease->expired(std::chrono::system_clock::now());
  const auto again = m::lease_of(node(lease->to_string()));
  if (!again || again->holder != lease->holder || again->renewed != lease->renewed ||
      again->duration != lease->duration)
    dm::fuzz::fail("the lease does not read back as written");
  return 0;
}
