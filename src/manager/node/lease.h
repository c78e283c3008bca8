// One run per node at a time: while it runs, driver-manager holds a lease on its node, written as the node
// annotation nvidia.com/gpu-driver-manager.lease (holder, renew time, duration) with resourceVersion
// preconditions - node patch is a permission the stock role already has. A second run waits for the lease
// (bounded) instead of "healing" a live run's taint, cordon and paused labels; a crashed holder's lease
// lapses after its duration, and a restart of the same pod (same holder) takes it over at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "manager/node/undo.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

// The lease as written on the node.
struct LeaseRecord {
  std::string holder;
  std::chrono::system_clock::time_point renewed;
  std::chrono::seconds duration{0};

  [[nodiscard]] std::string to_string() const;  // the annotation value (JSON)
  [[nodiscard]] bool expired(std::chrono::system_clock::time_point now) const {
    return now >= renewed + duration;
  }
};
// The node's lease, if it carries a readable one (an unreadable value counts as none: it can be taken).
std::optional<LeaseRecord> lease_of(const nlohmann::json& node);

struct LeaseOptions {
  std::chrono::seconds duration{60};  // a holder that stops renewing loses the lease after this
  std::chrono::seconds renew_every{15};
  std::chrono::seconds wait_at_most{150};  // how long a second run waits for a live holder
  std::chrono::seconds log_every{10};
};

// What a renewal carries besides the lease: an annotation due on the node (the run's progress during a long
// wait), asked for just before each renewal's patch, so that the node is written once where it would be
// written twice. `take` returns the annotation (key, value) or nothing; `done` is told whether the patch
// that carried it was applied.
struct RenewalRider {
  std::function<std::optional<std::pair<std::string, std::string>>()> take;
  std::function<void(bool applied)> done;
};

// Its waits and its taking write go through `client` (the run's requests, which SIGTERM stops); its renewals
// obey a token of the lease's own, fired when it stops renewing, so that they go on through a cleanup and
// never hold up its end.
class NodeLease {
 public:
  NodeLease(kube::Api& client, const Clock& clock, std::string node, std::string holder,
            LeaseOptions options = {});
  ~NodeLease();  // stops renewing (does not release: release() is an explicit step)
  NodeLease(const NodeLease&) = delete;
  NodeLease& operator=(const NodeLease&) = delete;

  // Takes the lease (waiting while another live holder has it, at most options.wait_at_most) and starts
  // renewing it in the background; returns the node as the taking write left it. `cancel` aborts the wait.
  // `seen`, the node as the caller last read it, saves the first GET when it shows no lease: the write is
  // conditional on its resourceVersion, so a stale `seen` only costs a conflict and a read.
  Result<nlohmann::json> acquire(const CancelToken& cancel, const nlohmann::json* seen = nullptr);
  // The same wait, without the write: returns the node as read once no other live holder has the lease.
  // The lease is then taken by the run's first node write (take_fold()).
  Result<nlohmann::json> wait_until_free(const CancelToken& cancel, const nlohmann::json* seen = nullptr);
  // The lease's part of a node write that carries other changes too (NodeOps::write_folded): the record,
  // refused when another live holder has the lease on the node read for the write. Then
  // first_write_done(): applied, the lease is held and renewed; maybe applied (unanswered), release()
  // looks; not applied, nothing is held.
  NodeFold take_fold();
  enum class WriteOutcome { kApplied, kMaybeApplied, kNotApplied };
  void first_write_done(WriteOutcome outcome);
  // Stops renewing and removes the annotation if it is still ours, with `also_remove` (other annotations
  // of the run that end with it) in the same patch; its requests stop with `stop` (the end of a run and its
  // cleanup have tokens of their own, which SIGTERM does not fire). Idempotent.
  Status release(const CancelToken& stop, const std::vector<std::string>& also_remove = {});
  // The release as a part of a node write that carries other changes too (NodeOps::write_folded): stops
  // renewing; the part removes the annotation if it is still ours, with `also_remove`. Then
  // folded_release_done(): applied, the lease is released; not, renewing goes on and release() is left.
  NodeFold release_fold(std::vector<std::string> also_remove);
  void folded_release_done(bool applied);
  // Set once, before the lease is taken.
  void set_renewal_rider(RenewalRider rider) { rider_ = std::move(rider); }
  // The renewals so far all succeeded (a lost lease is logged as an error when it happens).
  [[nodiscard]] bool held() const;
  [[nodiscard]] const std::string& holder() const { return holder_; }

 private:
  // One attempt: GET (or `seen`), decide, PATCH with the node's resourceVersion: the node when taken, else
  // who holds it.
  struct Attempt {
    std::optional<LeaseRecord> other;
    nlohmann::json node;
    bool conflict = false;  // the node changed between the GET and the PATCH (a heartbeat): look again now
  };
  enum class Take { kWrite, kLook };  // kLook: decide only
  Result<Attempt> try_take(const nlohmann::json* seen, Take take);
  Result<nlohmann::json> wait(const CancelToken& cancel, const nlohmann::json* seen, Take take);
  void started();  // held: start renewing
  // kOwnLast: a write guarded by the record this run wrote last (no read), when it knows it; kRead: read
  // the node, check the holder, write under its resourceVersion.
  enum class Look { kOwnLast, kRead };
  Result<bool> renew_once(const CancelToken& stop, Look look);  // false: someone else holds it now
  void renew_loop();
  void stop_renewing();

  kube::Api& client_;
  const Clock& clock_;
  std::string node_;
  std::string holder_;
  LeaseOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  CancelToken renewing_;  // the renewals' requests stop with it: fired by stop_renewing()
  bool held_ = false;
  bool lost_ = false;
  // A taking write failed without an answer that says it did not happen (cut short by SIGTERM, a
  // transport error): it may have been applied, so release() looks.
  bool maybe_taken_ = false;
  RenewalRider rider_;        // read by the renewer thread only, once set
  std::string last_written_;  // renewer thread only: the record the last renewal wrote ("" unknown)
  std::thread renewer_;
};

// Who this run is, for the lease: namespace/name of its pod, else host name and process id.
std::string lease_holder_identity(const std::string& pod_ref, const std::string& hostname);

}  // namespace dm::manager
