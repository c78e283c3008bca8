// `plan`'s two renderings of one report: a table for people and JSON for tools (docs/plan.md), and the words
// they share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "manager/plan/report.h"

namespace dm::manager {

// The words of the output ("wait", "already-ours", "cordoned-by-other", ...), one table each.
std::string_view action_name(PodAction a);
std::string_view action_name(TaintAction a);
std::string_view action_name(CordonAction a);

// The renderers: a table for people, JSON for tools.
std::string render_plan_text(const Plan& plan);
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace dm::manager
