// Marks another controller leaves on a node it has taken out of service for a quarantine or a maintenance
// of its own (docs/behaviour.md, Another controller's quarantine, lists where each one is defined).
//
// The contract: driver-manager lifts a cordon only while none of these marks is on the node. A cordon of
// this program's that such a controller has claimed since (it found the node already cordoned and went on
// with its own workflow on top of it) belongs to that workflow too: uncordoning would cancel it (NVSentinel
// reads an uncordon of a quarantined node as "cancel the break-fix") or put workloads on a node about to be
// drained or rebooted. So the cordon stays, and only its owner, or a later undo of ours once the marks are
// gone, lifts it. Every other change of the run (labels, taint) is undone as usual.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dm::manager {

// Where on the node a mark sits.
enum class MarkKind { kLabel, kAnnotation, kTaint };

struct QuarantineMark {
  MarkKind kind;
  std::string_view key;    // the label or annotation key, or the taint's key (any effect)
  std::string_view owner;  // who sets it, for people: "NVSentinel"
  std::string_view what;   // what it means, for people: "fault quarantine"
};

// The marks, in the order they are looked for: the first one found names the claim.
inline constexpr std::array<QuarantineMark, 4> kQuarantineMarks{{
    {MarkKind::kAnnotation, "quarantineHealthEvent", "NVSentinel", "fault quarantine"},
    {MarkKind::kLabel, "dgxc.nvidia.com/nvsentinel-state", "NVSentinel", "break-fix workflow"},
    {MarkKind::kAnnotation, "weave.works/kured-reboot-in-progress", "kured", "reboot"},
    {MarkKind::kTaint, "medik8s.io/drain", "node-maintenance-operator", "node maintenance"},
}};

// A mark found on a node, with its value (a taint as "key[=value]:effect").
struct FoundMark {
  const QuarantineMark* mark = nullptr;
  std::string value;
  // "NVSentinel's fault quarantine (annotation quarantineHealthEvent=<value, cut to 80 characters>)"
  [[nodiscard]] std::string describe() const;
};

// The first mark of kQuarantineMarks on `node`, if any.
std::optional<FoundMark> quarantine_mark(const nlohmann::json& node);

}  // namespace dm::manager
