// Node JSON as the flow reads it: schedulability, readiness, taints (kube/objects), and the annotations a
// run leaves on its node and a later run or `recover` reads back (the lease, the paused-labels record, the
// taint ownership, the state) with the plans built on them.
#include "fuzz_support.h"
#include "kube/client_impl.h"
#include "kube/objects.h"
#include "manager/commands/progress.h"
#include "manager/node/lease.h"
#include "manager/node/taint_ops.h"
#include "manager/rules/paused_record.h"
#include "manager/rules/taints.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace k = dm::kube;
  namespace m = dm::manager;
  const nlohmann::json node = k::parse_response(dm::fuzz::text(data, size));
  if (node.is_discarded()) return 0;
  (void)k::node_unschedulable(node);
  (void)k::node_ready(node);
  (void)k::annotation(node, m::kStateAnnotation);
  const nlohmann::json* taints = k::find(node, {"spec", "taints"});
  const k::Taint ours{"nvidia.com/gpu", "", "NoSchedule"};
  if (taints != nullptr) {
    (void)m::has_exact_taint(*taints, ours);
    (void)m::without_taint(m::with_taint(*taints, ours), ours);
  }
  for (const auto& t : k::node_taints(node)) (void)t.to_string();
  if (const auto lease = m::lease_of(node)) (void)lease->expired(std::chrono::system_clock::now());
  bool malformed = false;
  const auto record = m::paused_record_of(node, &malformed);
  (void)m::has_paused_record(node);
  (void)m::decide_record_restore(record, node);
  (void)m::decide_taint_add(node, ours);
  (void)m::decide_taint_remove(node);
  return 0;
}
