#include "kube/http.h"

#include <cctype>

#include "kube/http_exchange.h"

namespace dm::kube {

using http_detail::Exchange;
using http_detail::kMaxBufferedBody;
using http_detail::Link;
using http_detail::parse_url;
using http_detail::read_head;

struct HttpConnection::Impl : Link {};

HttpConnection::HttpConnection() : impl_(std::make_unique<Impl>()) {}
HttpConnection::~HttpConnection() = default;

Result<std::shared_ptr<TlsContext>> HttpConnection::tls_settings(const Config& config) {
  if (config.server.rfind("http://", 0) == 0) return std::shared_ptr<TlsContext>();
  auto ctx = TlsContext::create(config);
  if (!ctx) return ctx.error();
  return std::shared_ptr<TlsContext>(std::move(*ctx));
}

Result<std::unique_ptr<HttpConnection>> HttpConnection::create(const std::string& user_agent,
                                                               std::shared_ptr<TlsContext> tls) {
  std::unique_ptr<HttpConnection> c(new HttpConnection());
  Impl& im = *c->impl_;
  im.user_agent = user_agent;
  im.proxy_env = proxy_env_from_environment();
  im.tls_context = std::move(tls);
  return c;
}

Result<std::unique_ptr<HttpConnection>> HttpConnection::create(const Config& config,
                                                               const std::string& user_agent) {
  auto tls = tls_settings(config);
  if (!tls) return tls.error();
  return create(user_agent, std::move(*tls));
}

const std::shared_ptr<TlsContext>& HttpConnection::tls_context() const {
  return impl_->tls_context;
}

void HttpConnection::set_dialer(Dialer dialer) {
  impl_->close();
  impl_->dialer = std::move(dialer);
}

std::string HttpConnection::escape(std::string_view s) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string r;
  r.reserve(s.size());
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) != 0 || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      r += ch;
    } else {
      r += '%';
      r += kHex[u >> 4];
      r += kHex[u & 15];
    }
  }
  return r;
}

namespace {

// The request line and header fields, or why the request cannot be written.
Result<std::string> request_head(const HttpRequest& request, const http_detail::Target& target,
                                 const std::string& user_agent) {
  // Header values go into the request verbatim: a line break would split it (header injection).
  for (const std::string* v : std::array<const std::string*, 4>{&request.bearer_token, &request.content_type,
                                                                &request.method, &user_agent}) {
    if (v->find_first_of("\r\n") != std::string::npos)
      return Error("a request header value contains a line break");
  }
  // The request target too (a space would end it early).
  if (target.path.find_first_of(std::string_view("\r\n \0", 4)) != std::string::npos) {
    return Error("the request path contains a line break, space or NUL");
  }
  const bool has_body = !request.body.empty() || request.method == "POST" || request.method == "PUT" ||
                        request.method == "PATCH";
  std::string head = request.method + " " + target.path + " HTTP/1.1\r\nHost: " + target.authority +
                     "\r\nUser-Agent: " + user_agent + "\r\nAccept: application/json\r\n";
  if (!request.bearer_token.empty()) head += "Authorization: Bearer " + request.bearer_token + "\r\n";
  if (!request.content_type.empty()) head += "Content-Type: " + request.content_type + "\r\n";
  if (has_body) head += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  head += "\r\n";
  return head;
}

// Sends the request and reads the final response's head. A kept-alive connection may have been closed by the
// server just as it was reused: then the request is sent once more on a new connection, as long as no byte of
// a response came back and sending it again cannot do anything twice (a read, or nothing of the request was
// written).
bool send_and_read_head(Link& im, Exchange& x, const HttpRequest& request, const http_detail::Target& target,
                        const std::string& head, HttpResponse& resp, ResponseHead& h) {
  const std::string endpoint = (target.tls ? "https://" : "http://") + target.host + ":" + target.port;
  const bool read_only = request.method == "GET" || request.method == "HEAD";
  for (int attempt = 0;; ++attempt) {
    const bool reuse = im.endpoint == endpoint && im.idle_connection_usable();
    if (!reuse) {
      im.close();
      if (!x.connect(target)) return false;
      im.endpoint = endpoint;
    }
    const size_t received_before = x.received();
    const size_t written_before = x.written();
    const bool sent = x.write_all(head) && x.write_all(request.body);
    const bool wrote = x.written() != written_before;
    resp.request_sent = resp.request_sent || wrote;
    if (sent && read_head(x, resp, h)) return true;
    if (!reuse || attempt > 0 || resp.aborted || x.received() != received_before) return false;
    if (wrote && !read_only) return false;
    spdlog::debug("{} {}: the server had closed the kept-alive connection; sending it again on a new one",
                  request.method, target.path);
    x.clear_failure();
    im.close();
  }
}

// The body as the head announced it: streamed to on_body for a 2xx when the request asks for that, else held
// in resp.body up to kMaxBufferedBody. True when the whole body was read.
bool read_response_body(Exchange& x, const HttpRequest& request, ResponseHead& h, HttpResponse& resp) {
  const bool stream = request.on_body && resp.status >= 200 && resp.status < 300;
  const std::string too_large = "the response body is larger than " + std::to_string(kMaxBufferedBody >> 20) +
                                " MiB, the most this client holds in memory";
  const std::function<bool(std::string_view)> sink = [&](std::string_view piece) {
    if (!stream) {
      if (resp.body.size() + piece.size() > kMaxBufferedBody) return x.fail(too_large);
      resp.body.append(piece);
      return true;
    }
    if (request.on_body(piece)) return true;
    resp.aborted = true;
    return false;
  };
  if (!stream && h.content_length && *h.content_length > kMaxBufferedBody && !h.chunked)
    return x.fail(too_large);
  if (request.method == "HEAD" || resp.status == 204 || resp.status == 304) return true;  // no body
  if (h.chunked) return x.read_chunked(sink);
  if (h.content_length && !h.until_close) return x.read_body(*h.content_length, sink);
  h.keep_alive = false;
  return x.read_body(std::string::npos, sink);
}

}  // namespace

HttpResponse HttpConnection::perform(const HttpRequest& request) {
  HttpResponse resp;
  Impl& im = *impl_;
  auto target = parse_url(request.url);
  if (!target) {
    resp.transport_error = target.error().message;
    return resp;
  }
  auto head = request_head(request, *target, im.user_agent);
  if (!head) {
    resp.transport_error = head.error().message;
    return resp;
  }
  Exchange x(im, request, resp);
  bool complete = false;
  try {
    ResponseHead h;
    if (send_and_read_head(im, x, request, *target, *head, resp, h) && !x.failed()) {
      resp.status = h.status;
      complete = read_response_body(x, request, h, resp) && !x.failed();
      if (complete && !h.keep_alive) im.close();
    }
  } catch (...) {
    im.close();  // in the middle of a response: the connection cannot be reused
    throw;
  }
  if (!complete) im.close();
  if (resp.aborted) resp.transport_error.clear();
  return resp;
}

}  // namespace dm::kube
