#include "manager/undo.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dm::manager {

void UndoList::add(UndoAction action) {
  if (contains(action.name)) return;
  actions_.push_back(std::move(action));
}

bool UndoList::contains(const std::string& name) const {
  return std::any_of(actions_.begin(), actions_.end(), [&](const UndoAction& a) { return a.name == name; });
}

std::vector<std::string> UndoList::names() const {
  std::vector<std::string> out;
  for (auto it = actions_.rbegin(); it != actions_.rend(); ++it) out.push_back(it->name);
  return out;
}

Status UndoList::run_all(const CancelToken& cancel) {
  std::vector<UndoAction> failed;  // optional actions that failed, newest first
  Status result = ok_status();
  while (!actions_.empty()) {
    auto s = actions_.back().run();
    if (!s) {
      if (actions_.back().required) {
        result = s;
        break;
      }
      const auto& a = actions_.back();
      spdlog::warn("Failed to {}: {}", a.upstream_name.empty() ? a.name : a.upstream_name, s.error().message);
      if (cancel.cancelled()) {
        result = s;  // SIGTERM: the cleanup takes over from here, this action included
        break;
      }
      failed.push_back(std::move(actions_.back()));
    }
    actions_.pop_back();
  }
  // A run that fails after all is cleaned up: what failed here is still on the node.
  if (!result) {
    for (auto it = failed.rbegin(); it != failed.rend(); ++it) actions_.push_back(std::move(*it));
  }
  return result;
}

std::vector<std::string> UndoList::run_best_effort(const Clock& clock, const Deadline& deadline) {
  std::vector<std::string> left;
  while (!actions_.empty()) {
    UndoAction action = std::move(actions_.back());
    actions_.pop_back();
    if (deadline.passed(clock)) {
      left.push_back(action.name);
      continue;
    }
    if (auto s = action.run(); !s) {
      if (action.upstream_name.empty()) {
        spdlog::warn("Failed to {}: {}", action.name, s.error().message);
      } else {
        spdlog::warn("Failed to {} during cleanup: {}", action.upstream_name, s.error().message);
      }
      left.push_back(action.name);
    }
  }
  return left;
}

}  // namespace dm::manager
