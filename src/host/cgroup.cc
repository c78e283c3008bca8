#include "host/cgroup.h"

#include <algorithm>

#include "host/fs_util.h"

namespace dm::host {
namespace {

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// A pod UID as the kubelet writes it into a cgroup name: 32 hex digits, optionally in 8-4-4-4-12 groups
// separated by '-' (cgroupfs) or '_' (systemd). Static pods have a bare 32-digit hash.
std::optional<std::string> parse_uid(std::string_view s) {
  std::string out;
  int digits = 0;
  int last_separator_at = -1;  // digits before the last separator: one separator per group boundary
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (is_hex(c)) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c));
      ++digits;
    } else if ((c == '-' || c == '_') && (digits == 8 || digits == 12 || digits == 16 || digits == 20) &&
               digits != last_separator_at) {
      out.push_back('-');
      last_separator_at = digits;
    } else {
      return std::nullopt;
    }
  }
  const bool grouped = out.size() == 36 && std::count(out.begin(), out.end(), '-') == 4;
  const bool bare = out.size() == 32 && digits == 32;
  if (digits != 32 || !(grouped || bare)) return std::nullopt;
  return out;
}

// One path component: "pod<uid>" (cgroupfs) or "<prefix>-pod<uid>.slice" (systemd, any prefix such as
// "kubepods-burstable" or, with a kubelet cgroup root, "kubelet-kubepods-besteffort").
std::optional<std::string> uid_of_component(std::string_view c) {
  constexpr std::string_view kSlice = ".slice";
  if (c.size() > kSlice.size() && c.substr(c.size() - kSlice.size()) == kSlice) {
    c.remove_suffix(kSlice.size());
    const auto at = c.rfind("-pod");
    if (at == std::string_view::npos) return std::nullopt;
    return parse_uid(c.substr(at + 4));
  }
  if (c.substr(0, 3) != "pod") return std::nullopt;
  return parse_uid(c.substr(3));
}

std::optional<std::string> uid_of_path(std::string_view path) {
  if (path.find("kubepods") == std::string_view::npos) return std::nullopt;
  while (!path.empty()) {
    const auto slash = path.find('/');
    const std::string_view c = path.substr(0, slash);
    if (auto uid = uid_of_component(c)) return uid;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> pod_uid_from_cgroup(std::string_view proc_pid_cgroup) {
  // Each line is "<hierarchy>:<controllers>:<path>"; on v1 every controller has its own line, and all name
  // the same pod, so the first line naming one wins.
  for (const auto& line : split_lines(proc_pid_cgroup)) {
    const auto first = line.find(':');
    if (first == std::string::npos) continue;
    const auto second = line.find(':', first + 1);
    if (second == std::string::npos) continue;
    if (auto uid = uid_of_path(std::string_view(line).substr(second + 1))) return uid;
  }
  return std::nullopt;
}

}  // namespace dm::host
