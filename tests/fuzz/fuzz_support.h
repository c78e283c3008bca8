// What the fuzz targets share: the input as text, a scratch directory for parsers that read files, and
// splitting an input into parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dm::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

// A directory of this process (on tmpfs when /dev/shm is there), created on first use and removed at exit.
const std::string& scratch_dir();
// Writes `content` to `path` (replacing it); aborts when that fails (the target cannot go on).
void write_file(const std::string& path, std::string_view content);

// `input` cut at each occurrence of `separator` (a separator the seeds use between the parts of one input).
std::vector<std::string_view> split(std::string_view input, std::string_view separator);

// Crashes with `what` on stderr: a differential check failed (libFuzzer keeps the input).
[[noreturn]] void fail(std::string_view what);

}  // namespace dm::fuzz
