// Splitting a watch response (one JSON event per line, arriving in arbitrary chunks) into events.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace dm::kube {

class LineSplitter {
 public:
  // Appends `chunk` and calls `on_line` for each complete, non-blank line (without the newline). Stops and
  // returns false as soon as `on_line` does; the rest of the chunk is dropped.
  bool feed(std::string_view chunk, const std::function<bool(std::string_view line)>& on_line);
  // Bytes of an incomplete last line.
  [[nodiscard]] size_t pending() const { return buf_.size(); }

 private:
  std::string buf_;
};

}  // namespace dm::kube
