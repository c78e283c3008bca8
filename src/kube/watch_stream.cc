#include "kube/watch_stream.h"

namespace dm::kube {

bool LineSplitter::feed(std::string_view chunk, const std::function<bool(std::string_view line)>& on_line) {
  while (!chunk.empty()) {
    const auto nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      buf_.append(chunk);
      return true;
    }
    std::string_view line;
    if (buf_.empty()) {
      line = chunk.substr(0, nl);
    } else {
      buf_.append(chunk.substr(0, nl));
      line = buf_;
    }
    chunk.remove_prefix(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    const bool keep = blank || on_line(line);
    buf_.clear();
    if (!keep) return false;
  }
  return true;
}

}  // namespace dm::kube
