#include "host/mounts.h"

#include <spdlog/spdlog.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>

#include "host/fs_util.h"

namespace dm::host {
namespace {

bool at_or_below(std::string_view target, std::string_view root) {
  if (root == "/") return true;
  return target == root ||
         (target.size() > root.size() && target.substr(0, root.size()) == root && target[root.size()] == '/');
}

size_t depth(std::string_view p) {
  return static_cast<size_t>(std::count(p.begin(), p.end(), '/'));
}

int octal_digit(char c) {
  return c >= '0' && c <= '7' ? c - '0' : -1;
}

// The kernel writes space, tab, newline and backslash in a mount point as a backslash and three octal
// digits (fs/proc_namespace.c's mangle); anything else is literal.
std::string unescape_mount_field(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const int a = octal_digit(field[i + 1]), b = octal_digit(field[i + 2]), c = octal_digit(field[i + 3]);
      if (a >= 0 && b >= 0 && c >= 0) {
        out.push_back(static_cast<char>(a * 64 + b * 8 + c));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> mount_points(std::string_view mountinfo) {
  std::vector<std::string> points;
  while (!mountinfo.empty()) {
    const size_t eol = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, eol);
    mountinfo = eol == std::string_view::npos ? std::string_view{} : mountinfo.substr(eol + 1);
    // "ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS ...": the fifth space-separated field.
    for (int field = 0; field < 4 && !line.empty(); ++field) {
      const size_t sp = line.find(' ');
      line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
    }
    if (line.empty()) continue;
    points.push_back(unescape_mount_field(line.substr(0, line.find(' '))));
  }
  return points;
}

Result<std::vector<std::string>> mounts_under(const std::string& path) {
  std::error_code ec;
  const std::string root = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) return Error::with_errno(ec.value(), "cannot resolve " + path + ": " + ec.message());

  // Our own view of the mounts (mount namespaces differ per process).
  auto table = read_text_file("/proc/self/mountinfo");
  if (!table) return table.error();
  std::vector<std::string> found;  // in mountinfo order: a later mount on the same point is on top
  for (auto& target : mount_points(*table)) {
    if (at_or_below(target, root)) found.push_back(std::move(target));
  }
  std::reverse(found.begin(), found.end());
  std::stable_sort(found.begin(), found.end(),
                   [](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
  return found;
}

Result<std::vector<std::string>> unmount_tree(const std::string& path) {
  std::vector<std::string> done;
  std::string first_error;
  int first_errno = 0;
  // A mount hidden under a later mount of its parent only becomes reachable once that parent is gone,
  // so repeat while a pass makes progress.
  for (int pass = 0; pass < 8; ++pass) {
    auto targets = mounts_under(path);
    if (!targets) return targets.error();
    bool progress = false;
    for (const auto& t : *targets) {
      spdlog::debug("Unmounting {}", t);
      if (::umount2(t.c_str(), MNT_DETACH) == 0) {
        done.push_back(t);
        progress = true;
        continue;
      }
      const int e = errno;
      if (e == EINVAL) continue;  // already gone with its parent, or not a mount point any more
      if (first_error.empty()) {
        first_error = "cannot unmount " + t + ": " + errno_text(e);
        first_errno = e;
      }
    }
    if (!progress) break;
  }
  auto left = mounts_under(path);
  if (!left) return left.error();
  if (!left->empty()) {
    std::string msg = "failed to unmount " + path + ": still mounted: ";
    for (size_t i = 0; i < left->size(); ++i) msg += (i ? ", " : "") + (*left)[i];
    if (!first_error.empty()) msg += " (" + first_error + ")";
    return Error::with_errno(first_errno,
                             msg + "; check which process keeps it busy (e.g. with fuser -m) and retry");
  }
  return done;
}

}  // namespace dm::host
