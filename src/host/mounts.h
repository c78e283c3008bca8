// Recursive unmount through the process's mount table (/proc/self/mountinfo), deepest mount first.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::host {

// The mount points of a mountinfo text (proc(5)), in its order, octal escapes (\040 for a space…) decoded.
std::vector<std::string> mount_points(std::string_view mountinfo);

// Mount points equal to or below `path` (canonical, as in /proc/self/mountinfo), in unmount order:
// deepest first, and of several mounts stacked on one point the topmost first.
Result<std::vector<std::string>> mounts_under(const std::string& path);

// Detaches (umount2 MNT_DETACH) every mount equal to or below `path`, deepest first; EINVAL (no longer a
// mount point) is ignored. Returns the mount points unmounted, in order. Nothing mounted = success; it is an
// error if anything is still mounted there afterwards.
Result<std::vector<std::string>> unmount_tree(const std::string& path);

}  // namespace dm::host
