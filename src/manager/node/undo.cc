#include "manager/node/undo.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dm::manager {

void UndoList::add(UndoAction action) {
  std::lock_guard lk(mu_);
  if (contains_locked(action.key)) return;
  actions_.push_back(std::move(action));
}

bool UndoList::empty() const {
  std::lock_guard lk(mu_);
  return actions_.empty();
}

void UndoList::clear() {
  std::lock_guard lk(mu_);
  actions_.clear();
}

bool UndoList::contains(const std::string& key) const {
  std::lock_guard lk(mu_);
  return contains_locked(key);
}

bool UndoList::contains_locked(const std::string& key) const {
  return std::any_of(actions_.begin(), actions_.end(), [&](const UndoAction& a) { return a.key == key; });
}

void UndoList::note_kept(std::string what) {
  std::lock_guard lk(mu_);
  if (std::find(kept_.begin(), kept_.end(), what) == kept_.end()) kept_.push_back(std::move(what));
}

std::vector<std::string> UndoList::kept() const {
  std::lock_guard lk(mu_);
  return kept_;
}

std::vector<std::string> UndoList::names() const {
  std::lock_guard lk(mu_);
  std::vector<std::string> out;
  for (auto it = actions_.rbegin(); it != actions_.rend(); ++it) out.push_back(it->name);
  return out;
}

std::optional<UndoAction> UndoList::take_newest() {
  std::lock_guard lk(mu_);
  if (actions_.empty()) return std::nullopt;
  UndoAction a = std::move(actions_.back());
  actions_.pop_back();
  return a;
}

void UndoList::put_back(UndoAction action) {
  std::lock_guard lk(mu_);
  actions_.push_back(std::move(action));
}

Status UndoList::run_all(const NodeWriters& with, const CancelToken& cancel) {
  std::vector<UndoAction> failed;  // optional actions that failed, newest first
  Status result = ok_status();
  while (auto a = take_newest()) {
    auto s = a->run(with);
    if (s) continue;
    if (a->need == UndoNeed::kRequired) {
      result = s;
      put_back(std::move(*a));
      break;
    }
    spdlog::warn("Failed to {}: {}", a->upstream_name.empty() ? a->name : a->upstream_name,
                 s.error().message);
    if (cancel.cancelled()) {
      result = s;  // SIGTERM: the cleanup takes over from here, this action included
      put_back(std::move(*a));
      break;
    }
    failed.push_back(std::move(*a));
  }
  // A run that fails after all is cleaned up: what failed here is still on the node (and was newer than
  // the action that stopped the run).
  if (!result) {
    for (auto it = failed.rbegin(); it != failed.rend(); ++it) put_back(std::move(*it));
  }
  return result;
}

Result<bool> UndoList::run_folded(const std::function<Status(const std::vector<NodeFold>&)>& write) {
  std::vector<UndoAction> taken;  // oldest first
  {
    std::lock_guard lk(mu_);
    const bool all =
        std::all_of(actions_.begin(), actions_.end(), [](const UndoAction& a) { return a.fold; });
    if (!all) return false;
    taken.swap(actions_);
  }
  std::vector<NodeFold> folds;
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) folds.push_back(it->fold);
  if (auto s = write(folds); !s) {
    std::lock_guard lk(mu_);
    // Registered meanwhile (nothing runs beside the success path's undo, but the list allows it): newer.
    taken.insert(taken.end(), std::make_move_iterator(actions_.begin()),
                 std::make_move_iterator(actions_.end()));
    actions_.swap(taken);
    return s.error();
  }
  return true;
}

std::vector<std::string> UndoList::run_best_effort(const NodeWriters& with, const Clock& clock,
                                                   const Deadline& deadline) {
  std::vector<std::string> left;
  while (auto action = take_newest()) {
    if (deadline.passed(clock)) {
      left.push_back(action->name);
      continue;
    }
    if (auto s = action->run(with); !s) {
      if (action->upstream_name.empty()) {
        spdlog::warn("Failed to {}: {}", action->name, s.error().message);
      } else {
        spdlog::warn("Failed to {} during cleanup: {}", action->upstream_name, s.error().message);
      }
      left.push_back(action->name);
    }
  }
  return left;
}

}  // namespace dm::manager
