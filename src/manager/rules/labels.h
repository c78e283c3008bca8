// Operand label value transforms and this program's restore policy (docs/behaviour.md, Pausing and
// restoring operand labels).
#pragma once

#include <string>
#include <string_view>

namespace dm::manager {

// The marker upstream writes into a paused operand label.
inline constexpr std::string_view kPausedMarker = "paused-for-driver-upgrade";

// Upstream's pause(v): "" and "false" unchanged, "true" -> marker, values holding the marker unchanged,
// anything else gets "_<marker>" appended.
std::string pause_value(std::string_view v);

// Upstream's restore(v): "false" stays, exactly the marker -> "true", else every "<marker>[_]" removed and
// leading/trailing '_' stripped.
std::string upstream_restore_value(std::string_view v);

// True if v carries the pause marker (a label left paused, e.g. by a crashed earlier run).
bool is_paused_value(std::string_view v);

// Our restore policy: the snapshot value itself, except that a snapshot still holding the marker (left
// by a crashed run) is healed with upstream_restore_value(). Keeps "_foo_" as "_foo_" (upstream: "foo").
std::string restore_value(std::string_view snapshot);

// Our write policy: a label whose snapshot is empty/absent is neither paused nor restored (upstream
// stamped an empty value, which the GPU Operator then churns on).
inline bool should_write_label(std::string_view snapshot) {
  return !snapshot.empty();
}

}  // namespace dm::manager
