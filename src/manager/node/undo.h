// What a run changed on its node, each change with the action that undoes it. Every step that changes the
// node (pausing operand labels, the gpu-client taint, the cordon) registers its undo right after the change;
// every way a run ends - success, failure, SIGTERM - runs the list, newest first. See docs/ARCHITECTURE.md.
#pragma once

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace dm::manager {

class NodeOps;
class TaintOps;

// The writers an undo action sends its requests through, given by whoever runs the list: the run's on the
// success path (stopped by SIGTERM), the cleanup's after a failure (a token of their own, fired at the
// cleanup's deadline). So an action never holds a writer: which token stops its requests is decided where
// the list is run.
struct NodeWriters {
  NodeOps& node;
  TaintOps& taint;
};

// On the success path: a failing kRequired undo fails the run; a failing kOptional one is only a warning.
enum class UndoNeed { kRequired, kOptional };

// One part of a node write that carries several changes at once (NodeOps::write_folded): `body`, a JSON
// merge patch of the node; the lines that say what it does, logged before the write (a line already
// logged for an earlier attempt of the same write, decided again after a conflict, is not logged again);
// and what to do once the write was applied.
struct FoldedPatch {
  enum class Level { kInfo, kWarn };
  struct Line {
    Level level = Level::kInfo;
    std::string text;
  };
  // An Event on the node, recorded once the write was applied.
  struct Event {
    std::string reason;
    std::string message;
    std::string type = "Normal";
  };
  nlohmann::json body = nlohmann::json::object();
  std::optional<Error> refusal;  // the write must not be sent (decided again from a fresh read first)
  std::vector<Line> lines;
  std::vector<std::function<void()>> applied;
  std::vector<Event> events;
};
// Adds its part to `patch`, decided from `node` as read just before the write.
using NodeFold = std::function<void(const nlohmann::json& node, FoldedPatch& patch)>;

struct UndoAction {
  // Which change it undoes, "gpu-client-taint": the list holds one action per key, so a change registered
  // twice (before a write that may time out, and again after it) is undone once. Never shown: rewording
  // `name` changes no behaviour.
  std::string key;
  std::string name;  // what it does, for logs: "remove the GPU client taint nvidia.com/gpu:NoSchedule"
  std::function<Status(const NodeWriters& with)> run;
  UndoNeed need = UndoNeed::kRequired;
  // Upstream's name for the step in its failure warning ("uncordon node"): a failure is then logged as
  // "Failed to <it>: <err>" (" during cleanup" added after a failure), its text; "" = "Failed to <name>".
  std::string upstream_name{};
  // The same change as a part of one node write (run_folded()); nullptr: it only runs on its own.
  NodeFold fold{};
};

// Thread-safe: steps that run side by side (the gpu-client taint and the cordon) register from their own
// threads. "Newest" is the order in which add() calls completed. Changes made side by side do not depend on
// each other, so their undos may run in either order; everything registered before those steps started is
// undone after all of them, everything registered after they ended before them. The actions themselves run
// without the list's lock (an action may take long: it talks to the API server).
class UndoList {
 public:
  // Registers the undo of a change just made (or adopted from an earlier run). An action whose key is
  // already registered is not added again: each change is undone once.
  void add(UndoAction action);
  [[nodiscard]] bool empty() const;
  // Forgets every action: the changes they undo were never made after all (a first write refused).
  void clear();
  [[nodiscard]] bool contains(const std::string& key) const;
  [[nodiscard]] std::vector<std::string> names() const;  // newest first

  // The success path: runs the actions newest first, removing each one that succeeds; a failing required
  // action stops the run and is returned (it and the older ones stay registered for the cleanup); a failing
  // optional one is logged as a warning and dropped - unless the run does not end well after all: when a
  // required one fails later, or `cancel` (SIGTERM) has fired by the time it failed (then it stops there
  // and is returned), the failed optional ones stay registered too, so the cleanup tries them again.
  // An action added while the list runs is the newest, so it runs next.
  Status run_all(const NodeWriters& with, const CancelToken& cancel = CancelToken());

  // The success path in one node write: when every action has a fold, they are taken off the list and
  // `write` gets their folds, newest first; when it fails they go back as they were (for run_all() or the
  // cleanup) and its error is returned. False: some action only runs on its own; nothing was taken.
  Result<bool> run_folded(const std::function<Status(const std::vector<NodeFold>&)>& write);

  // What an action left on the node on purpose, and why ("the cordon, under NVSentinel's fault quarantine
  // (...)"), once each: said in the run's summary. Any thread may add.
  void note_kept(std::string what);
  [[nodiscard]] std::vector<std::string> kept() const;

  // Cleanup after a failure or SIGTERM: runs every action newest first, logging a failure as a warning and
  // going on; stops starting actions once `deadline` has passed. Returns the names of the actions that
  // failed or were not started: what is still left on the node.
  std::vector<std::string> run_best_effort(const NodeWriters& with, const Clock& clock,
                                           const Deadline& deadline);

 private:
  [[nodiscard]] bool contains_locked(const std::string& key) const;
  std::optional<UndoAction> take_newest();
  void put_back(UndoAction action);  // as the newest

  mutable std::mutex mu_;
  std::vector<UndoAction> actions_;  // oldest first
  std::vector<std::string> kept_;    // note_kept(), in order
};

}  // namespace dm::manager
