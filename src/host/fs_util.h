// Small file helpers shared by the host layer and vfio-manage (errors as values: the errno text in the
// message, the errno itself in Error::sys_errno).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::host {

// Whole file; error names the path and errno text.
Result<std::string> read_text_file(const std::string& path);
// Whole file, or nullopt if it does not exist; other failures are errors.
Result<std::optional<std::string>> read_text_file_if_exists(const std::string& path);
// Writes `data` to an existing file (O_WRONLY|O_TRUNC, no O_CREAT: sysfs attributes must already exist).
Status write_existing_file(const std::string& path, std::string_view data);
// Names in a directory, sorted; a missing directory gives an empty list, other failures an error.
Result<std::vector<std::string>> list_dir(const std::string& path);
// True if `path` exists (symlinks followed).
bool path_exists(const std::string& path);
// Leading/trailing ASCII whitespace removed.
std::string_view trim(std::string_view s);
// Lines of `text`, without the newline.
std::vector<std::string> split_lines(std::string_view text);
// "strerror(errno)" for a given errno value.
std::string errno_text(int err);

}  // namespace dm::host
