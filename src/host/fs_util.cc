#include "host/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dm::host {
namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

Result<std::string> read_fd(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return Error::from_errno(err, "cannot read " + path);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

std::string errno_text(int err) {
  return std::strerror(err);
}

Result<std::string> read_text_file(const std::string& path) {
  const Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    const int err = errno;
    return Error::from_errno(err, "cannot open " + path);
  }
  return read_fd(f.fd, path);
}

Result<std::optional<std::string>> read_text_file_if_exists(const std::string& path) {
  const Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    const int err = errno;
    if (err == ENOENT) return std::optional<std::string>();
    return Error::from_errno(err, "cannot open " + path);
  }
  auto r = read_fd(f.fd, path);
  if (!r) return r.error();
  return std::optional<std::string>(std::move(r).value());
}

Status write_existing_file(const std::string& path, std::string_view data) {
  const Fd f(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (f.fd < 0) {
    const int err = errno;
    return Error::from_errno(err, "cannot open " + path + " for writing");
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(f.fd, data.data() + done, data.size() - done);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return Error::from_errno(err, "cannot write \"" + std::string(trim(data)) + "\" to " + path);
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<std::vector<std::string>> list_dir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    const int err = errno;
    if (err == ENOENT) return std::vector<std::string>();
    return Error::from_errno(err, "cannot list directory " + path);
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string_view trim(std::string_view s) {
  const auto ws = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    lines.emplace_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

}  // namespace dm::host
