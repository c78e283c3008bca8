#include "manager/rules/quarantine.h"

#include <fmt/format.h>

#include "kube/objects.h"

namespace dm::manager {

namespace {

constexpr size_t kShownValue = 80;  // NVSentinel's annotation is a whole health event in JSON

std::string_view kind_name(MarkKind kind) {
  switch (kind) {
    case MarkKind::kLabel:
      return "label";
    case MarkKind::kAnnotation:
      return "annotation";
    case MarkKind::kTaint:
      return "taint";
  }
  return "mark";
}

std::optional<std::string> value_on(const nlohmann::json& node, const QuarantineMark& mark) {
  switch (mark.kind) {
    case MarkKind::kLabel:
      return kube::label(node, mark.key);
    case MarkKind::kAnnotation:
      return kube::annotation(node, mark.key);
    case MarkKind::kTaint:
      for (const auto& taint : kube::node_taints(node)) {
        if (taint.key == mark.key) return taint.to_string();
      }
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::string FoundMark::describe() const {
  const std::string shown = value.size() > kShownValue ? value.substr(0, kShownValue) + "..." : value;
  if (mark->kind == MarkKind::kTaint)
    return fmt::format("{}'s {} (taint {})", mark->owner, mark->what, shown);
  return fmt::format("{}'s {} ({} {}={})", mark->owner, mark->what, kind_name(mark->kind), mark->key, shown);
}

std::optional<FoundMark> quarantine_mark(const nlohmann::json& node) {
  for (const auto& mark : kQuarantineMarks) {
    if (auto value = value_on(node, mark)) return FoundMark{.mark = &mark, .value = std::move(*value)};
  }
  return std::nullopt;
}

}  // namespace dm::manager
