#include "host/mounts.h"

#include <libmount/libmount.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>

#include "host/fs_util.h"

namespace dm::host {
namespace {

struct TableDeleter {
  void operator()(libmnt_table* t) const { mnt_unref_table(t); }
};
struct IterDeleter {
  void operator()(libmnt_iter* i) const { mnt_free_iter(i); }
};

bool at_or_below(std::string_view target, std::string_view root) {
  if (root == "/") return true;
  return target == root ||
         (target.size() > root.size() && target.substr(0, root.size()) == root && target[root.size()] == '/');
}

size_t depth(std::string_view p) {
  return static_cast<size_t>(std::count(p.begin(), p.end(), '/'));
}

}  // namespace

Result<std::vector<std::string>> mounts_under(const std::string& path) {
  std::error_code ec;
  const std::string root = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) return Error("cannot resolve " + path + ": " + ec.message());

  const std::unique_ptr<libmnt_table, TableDeleter> table(mnt_new_table());
  if (!table) return Error("cannot allocate a libmount table");
  // Our own view of the mounts (mount namespaces differ per process).
  const int err = mnt_table_parse_file(table.get(), "/proc/self/mountinfo");
  if (err != 0) return Error("cannot parse /proc/self/mountinfo: " + errno_text(err < 0 ? -err : err));

  const std::unique_ptr<libmnt_iter, IterDeleter> iter(mnt_new_iter(MNT_ITER_FORWARD));
  if (!iter) return Error("cannot allocate a libmount iterator");
  std::vector<std::string> found;  // in mountinfo order: a later mount on the same point is on top
  libmnt_fs* fs = nullptr;
  while (mnt_table_next_fs(table.get(), iter.get(), &fs) == 0) {
    const char* target = mnt_fs_get_target(fs);
    if (target != nullptr && at_or_below(target, root)) found.emplace_back(target);
  }
  std::reverse(found.begin(), found.end());
  std::stable_sort(found.begin(), found.end(),
                   [](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
  return found;
}

Result<std::vector<std::string>> unmount_tree(const std::string& path) {
  std::vector<std::string> done;
  std::string first_error;
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
      if (first_error.empty()) first_error = "cannot unmount " + t + ": " + errno_text(e);
    }
    if (!progress) break;
  }
  auto left = mounts_under(path);
  if (!left) return left.error();
  if (!left->empty()) {
    std::string msg = "failed to unmount " + path + ": still mounted: ";
    for (size_t i = 0; i < left->size(); ++i) msg += (i ? ", " : "") + (*left)[i];
    if (!first_error.empty()) msg += " (" + first_error + ")";
    return Error(msg + "; check which process keeps it busy (e.g. with fuser -m) and retry");
  }
  return done;
}

}  // namespace dm::host
