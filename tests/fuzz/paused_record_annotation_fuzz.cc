// The paused-labels record annotation (manager/paused_record) against the node's labels: reading it, and
// the restore plan `recover` and a healing run build from it. Round trip: a record that reads back is
// written again as the same record.
#include "fuzz_support.h"
#include "manager/rules/paused_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace m = dm::manager;
  using Json = nlohmann::json;
  const auto node = [](std::string_view value) {
    return Json{{"metadata",
                 {{"annotations", {{std::string(m::kPausedLabelsAnnotation), value}}},
                  {"labels",
                   {{"nvidia.com/gpu.deploy.device-plugin", "paused-for-driver-upgrade"},
                    {"nvidia.com/gpu.deploy.dcgm", "false"}}}}}};
  };
  bool malformed = false;
  const Json n = node(dm::fuzz::text(data, size));
  const auto record = m::paused_record_of(n, &malformed);
  (void)m::decide_record_restore(record, n);
  (void)m::merge_paused_record(record, Json{{"nvidia.com/gpu.deploy.dcgm", "paused-for-driver-upgrade"}},
                               {{"nvidia.com/gpu.deploy.dcgm", "true"}});
  if (malformed) return 0;
  bool again_malformed = false;
  if (m::paused_record_of(node(m::paused_record_value(record)), &again_malformed) != record ||
      again_malformed)
    dm::fuzz::fail("the record does not read back as written");
  return 0;
}
