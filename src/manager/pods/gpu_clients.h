// Resetting third-party GPU client pods (docs/gpu-clients.md): pods on this node annotated
// nvidia.com/gpu.client=true are evicted (PDBs respected, in parallel, one deadline) and waited for by UID,
// while a NoSchedule taint keeps their replacements off the node until the driver is unloaded. DaemonSet
// pods selecting the nvidia.com/gpu.deploy.client node label are left to that label (operand flow).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "kube/stopped_by.h"
#include "manager/node/taint_ops.h"
#include "manager/node/undo.h"
#include "manager/pods/eviction.h"
#include "manager/pods/pod_watch.h"
#include "manager/rules/operands.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// The client pipeline of one phase as a run configured with `settings` applies it (`taint`: the one keeping
// clients off, for the toleration warning).
PodPipeline gpu_client_pipeline_for(const Settings& settings, GpuClientPhase phase,
                                    const std::optional<kube::Taint>& taint,
                                    std::shared_ptr<const LabelPause> label_pause);

// The first look of a reset: the node is tainted only when no client is refused and some are to be evicted
// or waited for.
bool client_reset_needs_taint(const PodListDecision& first_look);
// The first look of either phase over `pods` would taint the node (the run's own pod tolerating the taint
// matters only then).
bool clients_need_taint(const Settings& settings, const PodSnapshot& pods,
                        const std::shared_ptr<const LabelPause>& label_pause);

class GpuClientReset {
 public:
  // `cancel` is the run's token (SIGTERM): it stops the evictions, waits and requests of the reset; the
  // taint is added through `taint`, the run's taint writer. A taint this object adds or adopts registers
  // its removal in `undo`, sent through the writer of whoever runs the list.
  GpuClientReset(kube::Api& client, PodWatch& pods, const Clock& clock, CancelToken cancel,
                 const Settings& settings, UndoList& undo, TaintOps& taint,
                 std::shared_ptr<const LabelPause> label_pause = {});

  // The reset refuses with `why` (nothing evicted by it) where it would add the taint to the node: this
  // run's pod does not tolerate the taint, and the check before the first write found nothing to taint for.
  void refuse_to_taint(Error why) { taint_ops_.refuse_to_add(std::move(why)); }
  // The taint starts from `known`'s copy of the node instead of a GET (TaintOps::use_known_node).
  void use_known_node(KnownNode* known) {
    known_ = known;
    taint_ops_.use_known_node(known);
  }
  // The label pause as the run reads it right before pausing (with the DaemonSets' templates); called before
  // the reset starts.
  void use_label_pause(std::shared_ptr<const LabelPause> pause) { label_pause_ = std::move(pause); }

  // Startup self-healing on a path that will not unload the driver: removes a taint that an earlier,
  // crashed run added (our ownership annotation on `node`, the node as just read; no request when none).
  Status heal_leftover_taint(const nlohmann::json& node);
  // On a path that will unload the driver: keeps such a taint on (its clients stay away) and registers its
  // removal, which runs after the unload like that of a taint added by this run.
  void adopt_leftover_taint(const nlohmann::json& node);
  // The first look of reset_clients() over the pod watch, taken now: it would taint the node (no client
  // refused, some to evict or wait for, no taint in place yet).
  [[nodiscard]] bool reset_will_taint() const;
  // The taint as a part of the run's first node write (NodeOps::write_folded), for a run that knows before
  // that write that its reset will taint the node: decided from the node read for the write, it adds the
  // taint with our ownership annotation (its removal registered before the write, which may be applied
  // without an answer) and says "Tainting node ..." once the write was applied; the reset then finds the
  // taint in place and writes nothing. Nothing when the node has a taint with its key and effect already
  // (ours or not): the reset decides that one on its own, as without this part.
  [[nodiscard]] NodeFold taint_fold();
  // Resets the annotated clients that are not DRA plugins (while the operands are waited for). `stop`
  // stops its evictions and waits like SIGTERM (the flow fires it when the operand wait fails).
  Status reset_clients();
  Status reset_clients(const CancelToken& stop);
  // Resets the annotated clients that are DRA kubelet plugins (after the GPU workloads and the DRA claim
  // guard, before the module unload).
  Status reset_dra_plugin_clients();
  // There are DRA-plugin clients on the node for reset_dra_plugin_clients() to reset (or refuse): a look at
  // the pod watch, no request.
  [[nodiscard]] bool dra_plugin_clients_present() const;
  // A later look (manager/pods/late_arrivals): the annotated clients that are not DRA plugins among `pods`,
  // decided as the reset decides them, under the taint in place (or the configured one).
  [[nodiscard]] PodListDecision decide_clients(const PodSnapshot& pods) const;
  // Taints the node if the reset did not (its removal registered), then evicts `targets` and waits for
  // them like the reset (GPU_CLIENT_EVICTION_TIMEOUT, PDBs respected).
  Status evict_clients(const std::vector<EvictionTarget>& targets, const CancelToken& cancel);
  // Removes the taint through `taint` if this run (or a crashed earlier one) added it; idempotent; safe
  // after SIGTERM with a writer whose token SIGTERM does not fire (the cleanup's).
  Status remove_taint(TaintOps& taint);
  // The node carries a taint of ours that remove_taint() has yet to remove.
  [[nodiscard]] bool tainted() const { return owned_; }

 private:
  Status reset(GpuClientPhase phase, const CancelToken& cancel);
  Status evict(const std::vector<EvictionTarget>& targets, const std::string& what,
               const CancelToken& cancel);
  Status ensure_taint();
  void say_tainting() const;
  void register_undo();
  [[nodiscard]] PodPipeline pipeline(GpuClientPhase phase, const std::optional<kube::Taint>& taint) const;
  // The pods on the node right after tainting: a consistent LIST (the watch may lag by a few events) whose
  // pods the watch is then given a moment to catch up with (waits and evictions go by the watch).
  Result<PodSnapshot> relist(const CancelToken& cancel);
  void warn_about_replacements(const std::vector<EvictionTarget>& targets, const PodPipeline& pipeline) const;

  kube::StoppedBy client_;
  PodWatch& pods_;
  const Clock& clock_;
  CancelToken cancel_;
  const Settings& settings_;
  UndoList& undo_;
  std::shared_ptr<const LabelPause> label_pause_;
  TaintOps& taint_ops_;
  KnownNode* known_ = nullptr;  // the node as last seen (the folded taint's re-list floor)
  bool taint_folded_ = false;   // taint_fold() put the taint into an attempt of the first write
  Result<kube::Taint> taint_;
  std::optional<kube::Taint> effective_taint_;  // the taint keeping clients off (ours, or one already there)
  bool owned_ = false;
  std::string taint_in_place_at_;  // the node's resourceVersion with the taint in place (the re-list's floor)
};

}  // namespace dm::manager
