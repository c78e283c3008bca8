// /proc/<pid>/cgroup (host/cgroup): the pod UID of a process, cgroup v1 or v2, systemd or cgroupfs
// driver, any runtime. A UID found is always one: hex digits in 8-4-4-4-12 groups, or a static pod's bare
// 32 hex digits.
#include "fuzz_support.h"
#include "host/cgroup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto uid = dm::host::pod_uid_from_cgroup(dm::fuzz::text(data, size));
  if (!uid) return 0;
  // A UID in its 8-4-4-4-12 groups, or the bare 32 hex digits of a static pod's hash.
  const bool grouped = uid->size() == 36;
  if (!grouped && uid->size() != 32)
    dm::fuzz::fail("a pod UID of " + std::to_string(uid->size()) + " characters");
  for (size_t i = 0; i < uid->size(); ++i) {
    const char c = (*uid)[i];
    const bool dash = grouped && (i == 8 || i == 13 || i == 18 || i == 23);
    if (dash ? c != '-' : std::isxdigit(static_cast<unsigned char>(c)) == 0)
      dm::fuzz::fail("not a UID: " + *uid);
  }
  return 0;
}
