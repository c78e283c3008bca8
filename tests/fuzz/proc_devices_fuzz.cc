// /proc/devices (host/devices): the character-device majors of the NVIDIA modules, then which module owns
// a device number.
#include <sys/sysmacros.h>

#include "fuzz_support.h"
#include "host/devices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto devices = dm::host::NvidiaDevices::parse(dm::fuzz::text(data, size));
  for (unsigned major : {0U, 1U, 195U, 236U, 238U, 241U, 509U, 4095U}) {
    for (unsigned minor : {0U, 1U, 254U, 255U}) (void)devices.module_of(makedev(major, minor));
  }
  return 0;
}
