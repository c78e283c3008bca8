// A response head parsed straight from a buffer (kube/http_parse), without a connection: the whole head at
// once must read the same as its lines fed one by one, and never take more bytes than it was given.
#include "fuzz_support.h"
#include "kube/http_parse.h"

namespace {

// The head read line by line with the smaller entry points, up to the empty line (CRLF or LF endings).
// nullopt: the buffer ends before the head does.
std::optional<dm::Result<dm::kube::ResponseHead>> by_lines(std::string_view buffer) {
  dm::kube::ResponseHead head;
  bool first = true;
  size_t pos = 0;
  while (true) {
    const size_t nl = buffer.find('\n', pos);
    if (nl == std::string_view::npos) return std::nullopt;
    std::string_view line = buffer.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    if (line.empty() && !first) {
      dm::kube::finish_head(head);
      return head;
    }
    const dm::Status st =
        first ? dm::kube::parse_status_line(line, head) : dm::kube::parse_header_field(line, head);
    if (!st) return dm::Result<dm::kube::ResponseHead>(st.error());
    first = false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = dm::fuzz::text(data, size);
  dm::kube::ResponseHead whole;
  const auto taken = dm::kube::parse_response_head(in, whole);
  if (taken && *taken && **taken > in.size()) dm::fuzz::fail("the head took more bytes than it was given");
  if (taken && *taken) {
    if (whole.status < 100 || whole.status > 599) dm::fuzz::fail("status out of range");
    // A head that parsed as a whole parses the same line by line.
    const auto lines = by_lines(in);
    if (!lines || !*lines) dm::fuzz::fail("a head parsed whole but not line by line");
    const dm::kube::ResponseHead& h = **lines;
    if (h.status != whole.status || h.content_length != whole.content_length || h.chunked != whole.chunked ||
        h.until_close != whole.until_close || h.keep_alive != whole.keep_alive ||
        h.retry_after != whole.retry_after) {
      dm::fuzz::fail("the head reads differently whole and line by line");
    }
  }
  return 0;
}
