// /proc/self/mountinfo (host/mounts): the mount points with their octal escapes (\040 ...) decoded.
#include "fuzz_support.h"
#include "host/mounts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = dm::fuzz::text(data, size);
  const auto points = dm::host::mount_points(text);
  // Every line gives at most one mount point.
  size_t lines = 0;
  for (const char c : text) lines += c == '\n' ? 1 : 0;
  if (points.size() > lines + 1) dm::fuzz::fail("more mount points than lines");
  return 0;
}
