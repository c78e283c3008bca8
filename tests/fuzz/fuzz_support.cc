#include "fuzz_support.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace dm::fuzz {
namespace {

struct ScratchDir {
  std::string path;
  // In /dev/shm when there is one: the targets rewrite their files for every input, and on a disk file
  // system truncating and rewriting a file starts a write-back (ext4's auto_da_alloc) or a discard each time,
  // so the target waited on the disk instead of running. On tmpfs a rewrite is a copy in memory.
  ScratchDir() {
    std::error_code ec;
    const bool shm = std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK | X_OK) == 0;
    std::string pattern =
        (shm ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path()) / "dm-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) fail("cannot create a scratch directory");
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace

const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

void write_file(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out.flush()) fail("cannot write " + path);
}

std::vector<std::string_view> split(std::string_view input, std::string_view separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = input.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + separator.size());
  }
  parts.push_back(input);
  return parts;
}

void fail(std::string_view what) {
  std::fprintf(stderr, "differential check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace dm::fuzz

// Run once by libFuzzer before the first input: the parsers' log lines would only slow the run down.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}
