// HTTP/1.1 response heads and chunk sizes, parsed from bytes already read: strictly, so that a response
// cannot be read two ways (no obsolete line folding, no whitespace before a field's colon, one
// Content-Length, transfer codings that end in chunked or a body that runs to the close). Used by
// kube/http; callable on its own over any buffer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dm::kube {

struct ResponseHead {
  long status = 0;
  std::optional<size_t> content_length;
  bool chunked = false;      // the transfer codings end in chunked
  bool until_close = false;  // transfer codings that do not end in chunked: the body runs to the close
  bool keep_alive = true;    // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "keep-alive"
  std::string retry_after;   // Retry-After, if any
};

// "HTTP/1.1 200 OK" (the line without its terminator): starts a fresh head.
Status parse_status_line(std::string_view line, ResponseHead& head);

// One header field line (without its terminator) of the head.
Status parse_header_field(std::string_view line, ResponseHead& head);

// After the last field: settles how the body is framed (Transfer-Encoding wins over Content-Length, and
// then the connection is not reused).
void finish_head(ResponseHead& head);

// A whole head at the start of `buffer` (status line, fields, empty line; lines end in CRLF or LF).
// Returns the bytes it took, or nullopt when the buffer ends before the head does.
Result<std::optional<size_t>> parse_response_head(std::string_view buffer, ResponseHead& head);

// The size from a chunk's size line ("1a" or "1a;name=value"), at most 2^40.
Result<size_t> parse_chunk_size(std::string_view line);

}  // namespace dm::kube
