// A watch response body: split into lines (kube/watch_stream) across arbitrary chunks, each line decoded
// as an event, ERROR events read as a Status. Differential: the lines are those of splitting the whole text
// at once.
#include "fuzz_support.h"
#include "kube/client_impl.h"
#include "kube/watch_stream.h"

namespace {

// The non-blank lines of `text` without their line ends, as the watch reads them (an unfinished last line is
// not a line yet).
std::vector<std::string> reference_lines(std::string_view text) {
  std::vector<std::string> lines;
  const auto parts = dm::fuzz::split(text, "\n");
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string_view line = parts[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) lines.emplace_back(line);
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0] % 32 + 1;
  const std::string_view text = dm::fuzz::text(data + 1, size - 1);

  dm::kube::LineSplitter splitter;
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size(); at += piece) {
    splitter.feed(text.substr(at, piece), [&](std::string_view line) {
      lines.emplace_back(line);
      auto ev = dm::kube::decode_watch_event(line);
      if (ev && ev->type == "ERROR") (void)dm::kube::watch_error_status(ev->object);
      return true;
    });
  }
  if (lines != reference_lines(text)) dm::fuzz::fail("lines differ");
  const size_t last_nl = text.rfind('\n');
  if (splitter.pending() != text.size() - (last_nl == std::string_view::npos ? 0 : last_nl + 1))
    dm::fuzz::fail("pending bytes");
  return 0;
}
