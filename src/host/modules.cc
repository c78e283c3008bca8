#include "host/modules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sstream>

#include "host/fs_util.h"

namespace dm::host {
namespace {

// What /proc/modules puts among the holders of a module with an init function and no exit function.
constexpr std::string_view kPermanent = "[permanent]";

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A module of the NVIDIA driver for the log's table: a member of the stack, or any module named after it.
bool is_nvidia_module(std::string_view name) {
  return name.find("nvidia") != std::string_view::npos ||
         std::find(std::begin(kNvidiaModules), std::end(kNvidiaModules), name) != std::end(kNvidiaModules);
}

// How many references on `m` the other modules of `stack` may hold: one per holders link, plus the pins
// of kUnlinkedReferences (a link from the same holder counts as one of its pins).
int references_from_stack(const ModuleState& m, const std::vector<std::string>& stack) {
  int n = 0;
  for (const auto& h : m.holders) {
    if (contains(stack, h)) ++n;
  }
  for (const auto& u : kUnlinkedReferences) {
    if (u.target != m.name || !contains(stack, u.holder)) continue;
    n += u.count - (contains(m.holders, u.holder) ? 1 : 0);
  }
  return n;
}

// Whether `a` must be removed before `b`: it holds `b` through a link or a pin.
bool holds(const ModuleState& a, const ModuleState& b) {
  if (contains(b.holders, a.name)) return true;
  return std::any_of(std::begin(kUnlinkedReferences), std::end(kUnlinkedReferences),
                     [&](const UnlinkedReference& u) { return u.holder == a.name && u.target == b.name; });
}

Result<int> parse_count(std::string_view text, const std::string& what) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0)
    return Error("cannot parse " + what + ": \"" + std::string(text) + "\" is not a reference count");
  return n;
}

}  // namespace

std::string describe_module_blocker(const ModuleState& m, const std::vector<std::string>& stack) {
  std::vector<std::string> outside;
  for (const auto& h : m.holders) {
    if (!contains(stack, h)) outside.push_back(h);
  }
  const int others = m.refcount - references_from_stack(m, stack) - static_cast<int>(outside.size());
  if (outside.empty() && others <= 0 && m.users.empty()) return {};

  std::string out = fmt::format("{}: refcount {}", m.name, m.refcount);
  if (!outside.empty())
    out += fmt::format(", held by module(s) outside the NVIDIA stack: {}", fmt::join(outside, ", "));
  // References not explained by modules come from open device files (processes) or other kernel users.
  if (others > 0) out += fmt::format(", {} other reference(s)", others);
  if (!m.users.empty()) {
    out += fmt::format(", device files open in {}", fmt::join(m.users, ", "));
  } else if (others > 0) {
    out += " that no module link, known pin or open device file explains (a kernel user)";
  }
  return out;
}

UnloadDecision decide_nvidia_unload(const std::vector<ModuleState>& loaded) {
  UnloadDecision decision;
  std::vector<std::string> stack;
  stack.reserve(loaded.size());
  for (const auto& m : loaded) stack.push_back(m.name);

  for (const auto& m : loaded) {
    auto why = describe_module_blocker(m, stack);
    if (!why.empty()) decision.blockers.push_back(std::move(why));
  }
  if (!decision.allowed()) return decision;

  // Holders go before the modules they hold; otherwise keep kNvidiaModules order.
  std::vector<const ModuleState*> remaining;
  remaining.reserve(loaded.size());
  for (const auto& m : loaded) remaining.push_back(&m);
  while (!remaining.empty()) {
    auto next = std::find_if(remaining.begin(), remaining.end(), [&](const ModuleState* m) {
      return std::none_of(remaining.begin(), remaining.end(),
                          [&](const ModuleState* other) { return other != m && holds(*other, *m); });
    });
    if (next == remaining.end())
      next = remaining.begin();  // a holder cycle cannot happen; do not loop forever
    decision.order.push_back((*next)->name);
    remaining.erase(next);
  }
  return decision;
}

Status check_stack_unloadable(const std::vector<ModuleState>& stack) {
  std::vector<std::string> builtin;
  std::vector<std::string> permanent;
  std::vector<std::string> uncounted;
  for (const auto& m : stack) {
    if (m.builtin) {
      builtin.push_back(m.name);
    } else if (m.loaded && m.permanent) {
      permanent.push_back(m.name);
    } else if (m.loaded && !m.unloadable) {
      uncounted.push_back(m.name);
    }
  }
  if (!builtin.empty()) {
    return Error(fmt::format(
        "the NVIDIA driver cannot be replaced on this node: {} is built into the kernel, which can never "
        "unload it; boot a kernel that has the NVIDIA driver as loadable modules (nothing was changed)",
        fmt::join(builtin, ", ")));
  }
  if (!permanent.empty()) {
    return Error(fmt::format(
        "the NVIDIA driver cannot be unloaded on this node: {} {} permanent (/proc/modules says "
        "\"[permanent]\": loaded with an init function and no exit function), and the kernel can never "
        "unload a permanent module without a reboot; reboot the node without the NVIDIA driver loaded (or "
        "with a driver whose modules can be unloaded), then retry (nothing was changed)",
        fmt::join(permanent, ", "), permanent.size() == 1 ? "is" : "are"));
  }
  if (!uncounted.empty()) {
    return Error(fmt::format(
        "the NVIDIA driver cannot be unloaded on this node: {} {} loaded, but the kernel was built without "
        "module "
        "unloading (/proc/modules shows \"-\" for their reference counts and /sys/module/<m>/refcnt does not "
        "exist); reboot the node without the driver loaded, or use a kernel with module unloading "
        "(CONFIG_MODULE_UNLOAD), then retry (nothing was changed)",
        fmt::join(uncounted, ", "), uncounted.size() == 1 ? "is" : "are"));
  }
  return {};
}

std::string format_modules_table(std::string_view proc_modules) {
  std::string out = fmt::format("{:<24} {:>10} {:>9}  {}\n", "Module", "Size", "Ref Count", "Used by");
  for (const auto& line : split_lines(proc_modules)) {
    std::istringstream in(line);
    std::string name, size, refs, used_by;
    in >> name >> size >> refs >> used_by;
    if (!is_nvidia_module(name)) continue;
    if (used_by == "-") used_by.clear();
    if (!used_by.empty() && used_by.back() == ',') used_by.pop_back();
    out += fmt::format("{:<24} {:>10} {:>9}  {}\n", name, size, refs, used_by);
  }
  return out;
}

std::string proc_modules_line(const ModuleState& m) {
  // /proc/modules lists holders as "a,b," ("[permanent]," after them for a permanent module), "-" for none.
  std::string used_by;
  for (const auto& h : m.holders) used_by += h + ",";
  if (m.permanent) used_by += std::string(kPermanent) + ",";
  if (used_by.empty()) used_by = "-";
  return fmt::format("{} 0 {} {} Live 0x0000000000000000\n", m.name, m.refcount, used_by);
}

Result<ModuleState> read_module_state(std::string_view proc_modules, const std::string& sys_module_dir,
                                      std::string_view name) {
  ModuleState m;
  m.name = std::string(name);
  const std::string dir = sys_module_dir + "/" + m.name;

  // "name size refcnt holders state address": refcnt and holders are "-" without module unloading.
  bool listed = false;
  std::string proc_refs;
  std::string proc_holders;
  for (const auto& line : split_lines(proc_modules)) {
    std::istringstream in(line);
    std::string n, size;
    in >> n;
    if (n != name) continue;
    in >> size >> proc_refs >> proc_holders;
    listed = true;
    break;
  }

  auto refcnt = read_text_file_if_exists(dir + "/refcnt");
  if (!refcnt) return refcnt.error();
  m.loaded = listed || refcnt->has_value() || path_exists(dir + "/initstate");
  if (!m.loaded) {
    m.builtin = path_exists(dir);
    m.unloadable = false;
    return m;
  }
  if (refcnt->has_value()) {
    auto n = parse_count(trim(**refcnt), dir + "/refcnt");
    if (!n) return n.error();
    m.refcount = *n;
  } else if (listed && proc_refs != "-") {
    auto n = parse_count(proc_refs, "the reference count of " + m.name + " in /proc/modules");
    if (!n) return n.error();
    m.refcount = *n;
  } else {
    m.unloadable = false;  // the kernel keeps no reference count: it cannot unload modules
  }

  // "a,b," names the holders; "[permanent]," among them is no holder but says the module has no exit.
  std::vector<std::string> proc_holder_names;
  if (proc_holders != "-") {
    std::istringstream in(proc_holders);
    for (std::string h; std::getline(in, h, ',');) {
      if (h == kPermanent) {
        m.permanent = true;
      } else if (!h.empty()) {
        proc_holder_names.push_back(h);
      }
    }
  }
  auto holders = list_dir(dir + "/holders");
  if (!holders) return holders.error();
  m.holders = std::move(holders).value();
  if (m.holders.empty()) m.holders = std::move(proc_holder_names);
  return m;
}

ModuleBackend::ModuleBackend(std::string proc_root, std::string sys_root)
    : proc_root_(std::move(proc_root)), sys_root_(std::move(sys_root)) {}

std::string ModuleBackend::module_dir(std::string_view name) const {
  return sys_root_ + "/module/" + std::string(name);
}

Result<ModuleState> ModuleBackend::state(std::string_view name) const {
  auto text = proc_modules();
  if (!text) return text.error();
  return read_module_state(*text, sys_root_ + "/module", name);
}

bool ModuleBackend::loaded(std::string_view name) const {
  auto st = state(name);
  return st && st->loaded;
}

Result<std::string> ModuleBackend::proc_modules() const {
  auto text = read_text_file_if_exists(proc_root_ + "/modules");
  if (!text) return text.error();
  return text->value_or("");
}

std::vector<HolderProcess> ModuleBackend::holder_processes() const {
  auto devices = read_text_file_if_exists(proc_root_ + "/devices");
  if (!devices || !devices->has_value()) return {};
  return find_holder_processes(proc_root_, sys_root_, NvidiaDevices::parse(**devices));
}

Status ModuleBackend::check_removable(std::string_view name) const {
  const std::string what = "failed to unload kernel module " + std::string(name);
  auto st = state(name);
  if (!st) return st.error().wrap(what);
  if (st->builtin) return Error(what + ": it is built into the kernel");
  // Not loaded and in use: what delete_module(2) would answer, errno included.
  if (!st->loaded) return Error::with_errno(ENOENT, what + ": module is not loaded (ENOENT)");
  if (!st->unloadable) return Error(what + ": the kernel was built without module unloading");
  // The kernel's order: held by another module (EWOULDBLOCK, which is EAGAIN), permanent (EBUSY), then
  // referenced (EWOULDBLOCK).
  if (!st->holders.empty() || (!st->permanent && st->refcount > 0)) {
    std::string busy =
        fmt::format("{}: module is in use (EAGAIN): {}: refcount {}", what, st->name, st->refcount);
    if (!st->holders.empty()) busy += fmt::format(", used by {}", fmt::join(st->holders, ", "));
    return Error::with_errno(EAGAIN, busy);
  }
  if (st->permanent) {
    return Error::with_errno(
        EBUSY, fmt::format("{}: module is permanent (EBUSY): {} has no exit function, the kernel can never "
                           "unload it",
                           what, st->name));
  }
  return {};
}

}  // namespace dm::host
