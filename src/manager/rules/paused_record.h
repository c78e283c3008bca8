// The record of the operand labels a run paused, kept on the node itself (annotation
// nvidia.com/gpu-driver-manager.paused-labels = JSON object {label key: value before the pause}). It is
// written in the same patch as the pause and removed in the same patch as the restore, so `recover` can
// tell a label we paused from one an admin set to a paused-looking value, without guessing.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "manager/rules/node_keys.h"

namespace dm::manager {

// label key -> value before the pause.
using PausedRecord = std::map<std::string, std::string>;

// The record on `node`; empty when absent. A value that is not a JSON object of strings counts as empty
// (and is reported through `malformed` when given): nothing in it can be trusted.
PausedRecord paused_record_of(const nlohmann::json& node, bool* malformed = nullptr);
// True if the node carries the annotation at all (also a malformed one).
bool has_paused_record(const nlohmann::json& node);

// The annotation value for `record` (compact JSON).
std::string paused_record_value(const PausedRecord& record);

// `prior` (a crashed run's record: it holds the true values before the first pause) plus, for every key
// of `paused_labels` (a label patch about to be written) it does not hold yet, the value before this pause.
PausedRecord merge_paused_record(const PausedRecord& prior, const nlohmann::json& paused_labels,
                                 const std::map<std::string, std::string>& before);

// What putting back the recorded labels takes on `node`: the labels still at the value the pause wrote go
// back to the recorded value; labels someone changed since are theirs and only reported.
struct RecordRestoreDecision {
  nlohmann::json labels = nlohmann::json::object();                    // key -> value to write
  std::vector<std::pair<std::string, std::string>> changed_by_others;  // key, current ("" = absent)
  std::vector<std::string> already_back;                               // at the recorded value already
};
RecordRestoreDecision decide_record_restore(const PausedRecord& record, const nlohmann::json& node);

}  // namespace dm::manager
