// GPU_CLIENT_TAINT, `key[=value]:effect` (manager/taints), and the same text as the taint-ownership
// annotation holds it. Round trip: a taint that parses is written back as text that parses to it.
#include "fuzz_support.h"
#include "manager/rules/taints.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto taint = dm::manager::parse_taint(dm::fuzz::text(data, size));
  if (!taint) return 0;
  const auto again = dm::manager::parse_taint(taint->to_string());
  if (!again || !(*again == *taint)) dm::fuzz::fail("the taint does not read back as written");
  const auto with = dm::manager::with_taint(nlohmann::json::array(), *taint);
  if (!dm::manager::has_exact_taint(with, *taint) || !dm::manager::without_taint(with, *taint).empty())
    dm::fuzz::fail("added and removed taints differ");
  return 0;
}
