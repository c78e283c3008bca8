#include "kube/http_exchange.h"

#include <cstring>

namespace dm::kube::http_detail {

Result<Target> parse_url(const std::string& url) {
  Target t;
  std::string_view rest = url;
  if (rest.substr(0, 8) == "https://") {
    rest.remove_prefix(8);
  } else if (rest.substr(0, 7) == "http://") {
    t.tls = false;
    rest.remove_prefix(7);
  } else {
    return Error("unsupported URL (not https:// or http://): " + url);
  }
  // The authority ends where the path, query or fragment begins (a server URL may carry a path prefix).
  const size_t end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, end);
  if (end == std::string_view::npos) {
    t.path = "/";
  } else {
    t.path = (rest[end] == '/' ? "" : "/") + std::string(rest.substr(end));
  }
  t.authority = std::string(authority);
  if (authority.empty() || authority.find('@') != std::string_view::npos)
    return Error("bad URL host: " + url);
  std::string_view port;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Error("bad URL host: " + url);
    t.host = std::string(authority.substr(1, close - 1));
    if (authority.size() > close + 1) {
      if (authority[close + 1] != ':') return Error("bad URL host: " + url);
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.find(':');
    t.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  t.port = port.empty() ? (t.tls ? "443" : "80") : std::string(port);
  // A name (RFC 3986 reg-name: letters, digits, -._~, %-escapes, sub-delims), an IPv4 address or, in
  // brackets, an IPv6 address (with a zone). Nothing else reaches the Host header or the resolver.
  const bool bracketed = authority.front() == '[';
  const std::string_view allowed =
      bracketed ? "0123456789abcdefABCDEF:.%_~-ghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ"
                : "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+,;=";
  if (t.host.empty() || t.host.find_first_not_of(allowed) != std::string::npos ||
      t.port.find_first_not_of("0123456789") != std::string::npos || t.port.size() > 5) {
    return Error("bad URL host: " + url);
  }
  return t;
}

std::string errno_text(int err) {
  return std::strerror(
      err);  // NOLINT(concurrency-mt-unsafe): glibc's table, no shared buffer for known codes
}

// Status line and header fields of the final response (1xx interim responses are skipped).
bool read_head(Exchange& x, HttpResponse& resp, ResponseHead& head) {
  std::string line;
  while (true) {
    if (!x.read_line(line)) return false;
    if (auto st = parse_status_line(line, head); !st) return x.fail(st.error().message);
    size_t header_bytes = 0;
    while (true) {
      if (!x.read_line(line)) return false;
      if (line.empty()) break;
      header_bytes += line.size();
      if (header_bytes > kMaxHeaderBytes) return x.fail("response headers too long");
      if (auto st = parse_header_field(line, head); !st) return x.fail(st.error().message);
    }
    finish_head(head);
    resp.retry_after = head.retry_after;
    if (head.status >= 200 || head.status == 101) return true;
  }
}

}  // namespace dm::kube::http_detail
