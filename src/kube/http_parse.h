// HTTP/1.1 response heads and chunk sizes, parsed from bytes already read: strictly, so that a response
// cannot be read two ways (no obsolete line folding, no whitespace before a field's colon, one
// Content-Length, transfer codings that end in chunked or a body that runs to the close). Used by
// kube/http; callable on its own over any buffer.
#pragma once

#include <cstddef>
#include <functional>
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

// A chunked body, decoded from bytes as they arrive (in pieces of any size): chunk data goes to the sink,
// chunk extensions and trailer fields are skipped (each line at most 16 KiB, the trailer at most 256 KiB).
class ChunkedDecoder {
 public:
  using Sink = std::function<bool(std::string_view)>;  // false: stop (feed returns at once)

  // Takes bytes from the front of `in` and returns how many it took: all of them, unless the body ended
  // inside `in` (done(), the rest belongs to what follows) or the sink said stop (stopped()).
  Result<size_t> feed(std::string_view in, const Sink& sink);
  [[nodiscard]] bool done() const { return state_ == State::kDone; }
  [[nodiscard]] bool stopped() const { return stopped_; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  // Collects one line; true once it is complete (in line_, without its terminator).
  Result<bool> take_line(std::string_view in, size_t& pos);
  State state_ = State::kSize;
  std::string line_;
  bool line_complete_ = false;
  size_t left_ = 0;  // of the current chunk's data
  size_t trailer_bytes_ = 0;
  bool stopped_ = false;
};

}  // namespace dm::kube
