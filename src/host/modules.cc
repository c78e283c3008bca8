#include "host/modules.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "host/fs_util.h"

namespace dm::host {
namespace {

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::string describe_module_blocker(const ModuleState& m, const std::vector<std::string>& stack) {
  std::vector<std::string> outside;
  int in_stack = 0;
  for (const auto& h : m.holders) {
    if (contains(stack, h)) {
      ++in_stack;
    } else {
      outside.push_back(h);
    }
  }
  if (m.refcount - in_stack <= 0) return {};

  std::string out = fmt::format("{}: refcount {}", m.name, m.refcount);
  if (!outside.empty())
    out += ", held by module(s) outside the NVIDIA stack: " + fmt::format("{}", fmt::join(outside, ", "));
  // References not explained by holder modules come from open device files (processes, pods).
  const int others = m.refcount - static_cast<int>(m.holders.size());
  if (others > 0) {
    out += fmt::format(", used by {} process(es)/pod(s)", others);
    out += m.users.empty() ? std::string(" (not identified)")
                           : ": " + fmt::format("{}", fmt::join(m.users, ", "));
  } else if (!m.users.empty() && outside.empty()) {
    out += ", used by: " + fmt::format("{}", fmt::join(m.users, ", "));
  }
  return out;
}

UnloadPlan plan_nvidia_unload(const std::vector<ModuleState>& loaded) {
  UnloadPlan plan;
  std::vector<std::string> stack;
  stack.reserve(loaded.size());
  for (const auto& m : loaded) stack.push_back(m.name);

  for (const auto& m : loaded) {
    auto why = describe_module_blocker(m, stack);
    if (!why.empty()) plan.blockers.push_back(std::move(why));
  }
  if (!plan.allowed()) return plan;

  // Holders go before the modules they hold; otherwise keep kNvidiaModules order.
  std::vector<const ModuleState*> remaining;
  remaining.reserve(loaded.size());
  for (const auto& m : loaded) remaining.push_back(&m);
  while (!remaining.empty()) {
    auto next = std::find_if(remaining.begin(), remaining.end(), [&](const ModuleState* m) {
      return std::none_of(remaining.begin(), remaining.end(), [&](const ModuleState* other) {
        return other != m && contains(m->holders, other->name);
      });
    });
    if (next == remaining.end())
      next = remaining.begin();  // a holder cycle cannot happen; do not loop forever
    plan.order.push_back((*next)->name);
    remaining.erase(next);
  }
  return plan;
}

std::string format_modules_table(std::string_view proc_modules) {
  std::string out = fmt::format("{:<24} {:>10} {:>9}  {}\n", "Module", "Size", "Ref Count", "Used by");
  for (const auto& line : split_lines(proc_modules)) {
    if (line.find("nvidia") == std::string::npos) continue;
    std::istringstream in(line);
    std::string name, size, refs, used_by;
    in >> name >> size >> refs >> used_by;
    if (used_by == "-") used_by.clear();
    if (!used_by.empty() && used_by.back() == ',') used_by.pop_back();
    out += fmt::format("{:<24} {:>10} {:>9}  {}\n", name, size, refs, used_by);
  }
  return out;
}

Status ModuleBackend::check_removable(std::string_view name) const {
  const std::string what = "failed to unload kernel module " + std::string(name);
  auto st = state(name);
  if (!st) return st.error().wrap(what);
  if (!st->loaded) return Error(what + ": module is not loaded (ENOENT)");
  if (st->refcount > 0)
    return Error(what + ": module is in use (EBUSY): " + describe_module_blocker(*st, {}));
  return {};
}

std::string proc_modules_line(const ModuleState& m) {
  // /proc/modules lists holders as "a,b," and "-" for none.
  if (m.holders.empty()) return fmt::format("{} 0 {} - Live 0x0000000000000000\n", m.name, m.refcount);
  return fmt::format("{} 0 {} {}, Live 0x0000000000000000\n", m.name, m.refcount, fmt::join(m.holders, ","));
}

}  // namespace dm::host
