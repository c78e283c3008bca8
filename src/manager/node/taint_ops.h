// The gpu-client taint on this program's Node (docs/gpu-clients.md, The taint): added and removed with a
// resourceVersion precondition, so a concurrent change to the node's other taints is never lost, and with
// ownership recorded on the node in the same patch, so only a taint driver-manager added is ever removed
// (also by the next run after a crash).
#pragma once

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "kube/stopped_by.h"
#include "manager/node/known_node.h"
#include "manager/node/undo.h"
#include "manager/rules/node_keys.h"
#include "manager/rules/taints.h"

namespace dm::manager {

// What add() found and did.
enum class TaintOutcome {
  kAdded,          // we added it now (and our annotation)
  kAlreadyOurs,    // it was on the node with our annotation (an earlier run of ours added it)
  kPresentNotOurs  // a taint with the same key and effect is on the node, not ours: left alone for good
};

// --- Pure planning over the Node JSON (unit-tested) -----------------------------------------------

// The value of our ownership annotation, if the node carries it.
std::optional<std::string> taint_owner_annotation(const nlohmann::json& node);

// What adding `taint` to `node` takes.
struct TaintAddDecision {
  TaintOutcome outcome = TaintOutcome::kAdded;
  kube::Taint effective;  // the taint on the node afterwards with taint's key and effect
  std::optional<nlohmann::json>
      patch;  // merge-patch body (with metadata.resourceVersion), if a write is needed
  // TaintOps::add: the node's resourceVersion at which the taint was seen in place (the answer to our
  // write, or the read that found it there); a later list "not older than" it cannot miss a pod bound
  // before the taint.
  std::string in_place_at;
};
// kPresentNotOurs when a taint with the same key+effect is there and our annotation does not name it;
// kAlreadyOurs when our annotation names exactly `taint` and it is there. A taint of ours with other
// key/value/effect (GPU_CLIENT_TAINT changed since a crashed run) is dropped in the same patch.
TaintAddDecision decide_taint_add(const nlohmann::json& node, const kube::Taint& taint);

// What removing our taint from `node` takes.
struct TaintRemoveDecision {
  std::optional<std::string> owned;     // our annotation's value (nullopt: we own nothing here)
  std::optional<kube::Taint> removed;   // the taint that the patch removes (nullopt: it is not on the node)
  std::optional<nlohmann::json> patch;  // merge-patch body, if a write is needed
};
// Removes exactly the taint our annotation names (key, value and effect) and the annotation; an
// annotation that does not parse is removed alone. Nothing to do without the annotation.
TaintRemoveDecision decide_taint_remove(const nlohmann::json& node);

// The removal as a part of one node write (NodeOps::write_folded), decided from `node`: nothing without our
// annotation; `on_applied` runs once the write was applied.
void fold_taint_remove(const nlohmann::json& node, const std::string& node_name, FoldedPatch& part,
                       std::function<void()> on_applied);

// --- The writes -----------------------------------------------------------------------------------

// Adds / removes the gpu-client taint on one node. Every request it sends and every pause between its
// attempts stop with `cancel` (kube::StoppedBy): the run's writes with SIGTERM, the cleanup's with its own
// token, so that the taint comes off after SIGTERM too.
class TaintOps {
 public:
  TaintOps(kube::Api& client, const Clock& clock, CancelToken cancel, std::string node,
           int max_attempts = 10);

  // GETs the node and adds `taint` (+ our annotation) unless a taint with its key and effect is there.
  // On 409 (the node changed since the GET) it reads the node again and retries.
  Result<TaintAddDecision> add(const kube::Taint& taint);
  // Removes the taint our annotation names (+ the annotation), from `node` if given (saves a GET when the
  // caller has just read the node) and from a fresh GET after a conflict. Returns the removed taint.
  Result<std::optional<kube::Taint>> remove_ours(const nlohmann::json* node = nullptr);

  [[nodiscard]] const std::string& node() const { return node_; }

  // Every node this object reads or writes is remembered in `known`, and add() starts from its copy
  // instead of a GET (see KnownNode), under its guarded-write lock. Not owned; null (the default) reads the
  // node before every write.
  void use_known_node(KnownNode* known) { known_ = known; }
  // From now on add() returns `why` instead of writing a taint that is not on the node yet (decided on a
  // fresh read); a taint already there is still taken as it is.
  void refuse_to_add(Error why) { refusal_ = std::move(why); }

 private:
  Result<nlohmann::json> get();
  // The known copy when the decision taken on it writes something (a decision to write nothing is taken on
  // a fresh read only); nullopt: read the node.
  [[nodiscard]] std::optional<nlohmann::json> copy_to_change(const kube::Taint& taint) const;
  void conflict_pause(int attempt) const;  // before re-reading the node after a conflicting write

  // The known node's lock, else one of its own (no other writer shares it then).
  std::mutex& guarded_write_lock() {
    return known_ != nullptr ? known_->guarded_write_lock() : own_write_lock_;
  }

  kube::StoppedBy client_;
  const Clock& clock_;
  std::string node_;
  int max_attempts_;
  KnownNode* known_ = nullptr;
  std::mutex own_write_lock_;
  std::optional<Error> refusal_;
};

}  // namespace dm::manager
