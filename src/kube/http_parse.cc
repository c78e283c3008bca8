#include "kube/http_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace dm::kube {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls `each` with every trimmed, non-empty element of a comma-separated field value.
template <class F>
void for_each_element(std::string_view value, F&& each) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view element = trim(value.substr(0, comma));
    if (!element.empty()) each(element);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::optional<size_t> parse_decimal(std::string_view s) {
  size_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

}  // namespace

Status parse_status_line(std::string_view line, ResponseHead& head) {
  // "HTTP/1.1 200 OK": the version, a space, three digits, then the end or a space and a reason. The first
  // digit is the class, 1 to 5: there is no other, so "004" or "700" is no answer to act on.
  const bool ok = line.size() >= 12 && line.substr(0, 7) == "HTTP/1." && (line[7] == '0' || line[7] == '1') &&
                  line[8] == ' ' && line[9] >= '1' && line[9] <= '5' &&
                  std::all_of(line.begin() + 10, line.begin() + 12,
                              [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }) &&
                  (line.size() == 12 || line[12] == ' ');
  if (!ok) return Error("not an HTTP/1.x response: " + std::string(line.substr(0, 100)));
  head = ResponseHead{};
  head.status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  head.keep_alive = line[7] == '1';  // HTTP/1.0 closes unless it says keep-alive
  return {};
}

Status parse_header_field(std::string_view line, ResponseHead& head) {
  if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
    return Error("the response folds a header field over lines (obsolete line folding)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Error("a response header line without a colon");
  const std::string_view name = line.substr(0, colon);
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
    if (!name.empty() && (name.back() == ' ' || name.back() == '\t'))
      return Error("whitespace before the colon of a response header field");
    return Error("a response header field with a bad name");
  }
  const std::string_view value = trim(line.substr(colon + 1));
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
    return Error("a response header field value with a line break or NUL");
  if (iequals(name, "content-length")) {
    Status st;
    for_each_element(value, [&](std::string_view v) {
      const auto n = parse_decimal(v);
      if (!n) {
        st = Error("bad Content-Length in the response");
      } else if (head.content_length && *head.content_length != *n) {
        if (st) st = Error("conflicting Content-Length values in the response");
      } else {
        head.content_length = n;
      }
    });
    if (!st) return st;
    if (!head.content_length) return Error("bad Content-Length in the response");
  } else if (iequals(name, "transfer-encoding")) {
    Status st;
    for_each_element(value, [&](std::string_view coding) {
      const std::string_view bare = trim(coding.substr(0, coding.find(';')));
      if (head.chunked && st) st = Error("the response applies a transfer coding after chunked");
      head.chunked = iequals(bare, "chunked");
      head.until_close = !head.chunked;
    });
    if (!st) return st;
  } else if (iequals(name, "connection")) {
    for_each_element(value, [&](std::string_view token) {
      if (iequals(token, "close")) head.keep_alive = false;
      if (iequals(token, "keep-alive")) head.keep_alive = true;
    });
  } else if (iequals(name, "retry-after")) {
    head.retry_after = std::string(value);
  }
  return {};
}

void finish_head(ResponseHead& head) {
  if (head.chunked || head.until_close) {
    // Both framings: the transfer coding counts, and the connection cannot be trusted for another request.
    if (head.content_length) head.keep_alive = false;
    head.content_length.reset();
  }
  if (head.until_close) head.keep_alive = false;
}

Result<std::optional<size_t>> parse_response_head(std::string_view buffer, ResponseHead& head) {
  size_t pos = 0;
  bool first = true;
  while (true) {
    const size_t nl = buffer.find('\n', pos);
    if (nl == std::string_view::npos) return std::optional<size_t>();
    std::string_view line = buffer.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    if (first) {
      if (auto st = parse_status_line(line, head); !st) return st.error();
      first = false;
      continue;
    }
    if (line.empty()) {
      finish_head(head);
      return std::optional<size_t>(pos);
    }
    if (auto st = parse_header_field(line, head); !st) return st.error();
  }
}

Result<size_t> parse_chunk_size(std::string_view line) {
  const std::string_view digits = trim(line.substr(0, line.find(';')));
  size_t size = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || size > (size_t{1} << 40))
    return Error("bad chunk size in the response");
  return size;
}

Result<bool> ChunkedDecoder::take_line(std::string_view in, size_t& pos) {
  constexpr size_t kMaxLine = size_t{16} * 1024;
  if (line_complete_) {
    line_.clear();
    line_complete_ = false;
  }
  const size_t nl = in.find('\n', pos);
  const size_t end = nl == std::string_view::npos ? in.size() : nl;
  if (line_.size() + (end - pos) > kMaxLine) return Error("response line too long");
  line_.append(in.substr(pos, end - pos));
  pos = nl == std::string_view::npos ? in.size() : nl + 1;
  if (nl == std::string_view::npos) return false;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  line_complete_ = true;
  return true;
}

Result<size_t> ChunkedDecoder::feed(std::string_view in, const Sink& sink) {
  constexpr size_t kMaxTrailerBytes = size_t{256} * 1024;
  size_t pos = 0;
  stopped_ = false;
  while (pos < in.size() && state_ != State::kDone) {
    if (state_ == State::kData) {
      const size_t take = std::min(left_, in.size() - pos);
      left_ -= take;
      const std::string_view piece = in.substr(pos, take);
      pos += take;
      if (left_ == 0) state_ = State::kDataEnd;
      if (!sink(piece)) {
        stopped_ = true;
        return pos;
      }
      continue;
    }
    auto complete = take_line(in, pos);
    if (!complete) return complete.error();
    if (!*complete) break;
    if (state_ == State::kSize) {
      const auto size = parse_chunk_size(line_);
      if (!size) return size.error();
      left_ = *size;
      state_ = left_ == 0 ? State::kTrailer : State::kData;
    } else if (state_ == State::kDataEnd) {
      if (!line_.empty()) return Error("bad chunk end in the response");
      state_ = State::kSize;
    } else {  // trailer fields, then the empty line
      trailer_bytes_ += line_.size();
      if (trailer_bytes_ > kMaxTrailerBytes) return Error("response trailer too long");
      if (line_.empty()) state_ = State::kDone;
    }
  }
  return pos;
}

}  // namespace dm::kube
