// Writes to this program's Node: label patches with upstream's retry, cordon/uncordon with ownership
// (only our own cordon is undone: docs/behaviour.md, The undo list), and best-effort Events.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "kube/stopped_by.h"
#include "manager/node/known_node.h"
#include "manager/node/undo.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

// Upstream's label-update backoff: 1 s doubling, 20 % jitter, 7 attempts (sleeps about 1..32 s).
struct RetryPolicy {
  Duration initial = std::chrono::seconds(1);
  double factor = 2.0;
  double jitter = 0.2;
  int attempts = 7;
};

// What cordon() found and did.
enum class CordonOutcome {
  kCordoned,               // we cordoned it now (annotation set in the same patch)
  kAlreadyOurs,            // cordoned by an earlier run of ours (annotation present): still ours
  kAlreadyCordonedByOther  // cordoned by someone else: left alone, never uncordoned by us
};

// True when the node object carries our cordon annotation.
bool cordoned_by_us(const nlohmann::json& node);

class NodeOps {
 public:
  // Every request it sends and every pause between its attempts stop with `cancel` (kube::StoppedBy).
  NodeOps(kube::Api& client, const Clock& clock, CancelToken cancel, std::string node,
          RetryPolicy retry = {});

  [[nodiscard]] const std::string& node() const { return node_; }

  // Every node this object reads or writes is remembered in `known`, and cordon() starts from its copy
  // instead of a GET (see KnownNode), under its guarded-write lock. Not owned; null (the default) reads the
  // node before every cordon.
  void use_known_node(KnownNode* known) { known_ = known; }

  // GET the node.
  Result<nlohmann::json> get();

  // Strategic-merge PATCH of metadata.labels (`labels`: key -> string, or null to delete), retried per the
  // RetryPolicy; each failed attempt logs "Failed to update labels on node <n>, retrying: <err>". Errors that
  // a retry cannot fix (400, 403, 404, 422) are returned at once, and so is a patch the API server left
  // unanswered until the deadline of what it serves (the client tried it again until then). `annotations`
  // (key -> string or null) go in the same patch: a record that must change together with the labels.
  Status update_labels(const nlohmann::json& labels,
                       const nlohmann::json& annotations = nlohmann::json::object());

  // Cordons the node unless it already is; ours is marked with kCordonedAnnotation in the same patch, made
  // conditional on the node's resourceVersion so that a concurrent admin cordon is never taken for ours.
  Result<CordonOutcome> cordon();

  // Whose cordon uncordon() lifts: only ours, or (upstream's UNCORDON_ALWAYS) whoever cordoned the node.
  enum class Whose { kOurs, kAnyone };
  // Told why a cordon that uncordon() would lift stays: "the cordon, under <whose claim>".
  using OnKept = std::function<void(const std::string& what)>;
  // Uncordons the node if our annotation is on it (and removes the annotation). A cordon without our
  // annotation is left alone (logged), unless `whose` is kAnyone. Never a cordon that another controller has
  // claimed for a quarantine or maintenance of its own (a mark of manager/rules/quarantine on the node):
  // that one stays, with our annotation (a later undo lifts it once the mark is gone); the line says why,
  // an Event `CordonKept` records it on the node, and `kept` is told.
  Status uncordon(Whose whose, const OnKept& kept = {});

  // The same as a part of one node write (write_folded()).
  [[nodiscard]] NodeFold uncordon_fold(Whose whose, OnKept kept = {}) const;

  // One JSON merge patch of the node with every part of `folds`, each decided from the node as read just
  // before: sent under that node's resourceVersion, and after a conflict decided again from a fresh read
  // (never sent twice as it was). Nothing is sent when no part changes anything. The parts' lines are
  // logged before the write, each once; their `applied` run, and their Events are recorded, once it was
  // applied. `what` names the write.
  // `first`, the node as last seen, saves the first GET (a stale copy only costs the conflict and a read;
  // a refusal is decided on a fresh read only). A failure other than a conflict is retried as the label
  // patches are ("Failed to update <what> on node <n>, retrying: …"), decided again each time. On failure,
  // `maybe_applied` (if given) tells whether an attempt failed without saying it was not applied (no
  // answer, a server error): a later attempt's refusal does not undo an earlier one that went through.
  Status write_folded(const std::vector<NodeFold>& folds, const std::string& what,
                      const nlohmann::json* first = nullptr, bool* maybe_applied = nullptr);

  // Removes our cordon annotation and leaves spec.unschedulable as it is (someone else owns the cordon now).
  Status drop_cordon_annotation();

  // Best effort: records a core/v1 Event on the node (failures only logged at debug level), tried through an
  // outage for at most 30 s. When Events are forbidden (403), says so once at info level with the RBAC rule
  // to add, and stops trying.
  void event(const std::string& reason, const std::string& message, const std::string& type = "Warning");

  NodeOps(const NodeOps&) = delete;
  NodeOps& operator=(const NodeOps&) = delete;

 private:
  Result<nlohmann::json> patch_with_retry(const nlohmann::json& body, const std::string& what);
  void remember(const nlohmann::json& node) const {
    if (known_ != nullptr) known_->remember(node);
  }

  // The known node's lock, else one of its own (no other writer shares it then).
  std::mutex& guarded_write_lock() {
    return known_ != nullptr ? known_->guarded_write_lock() : own_write_lock_;
  }

  kube::StoppedBy client_;
  const Clock& clock_;
  std::string node_;
  RetryPolicy retry_;
  std::atomic<bool> events_forbidden_{false};
  KnownNode* known_ = nullptr;
  std::mutex own_write_lock_;
};

}  // namespace dm::manager
