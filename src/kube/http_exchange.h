// The HTTP/1.1 client's inside: the URL it was asked for, the connection (socket, TLS session, buffered
// input) and one request/response exchange over it. Only kube/http.cc and its tests include this.
#pragma once

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "kube/http.h"
#include "kube/http_parse.h"
#include "kube/proxy.h"
#include "kube/tls.h"

namespace dm::kube::http_detail {

inline constexpr std::chrono::milliseconds kConnectTimeout{10000};
inline constexpr size_t kMaxLine = size_t{16} * 1024;          // one status, header or chunk-size line
inline constexpr size_t kMaxHeaderBytes = size_t{256} * 1024;  // all header lines of one response
inline constexpr size_t kReadSize = size_t{16} * 1024;
// A response body held whole (everything but the streamed Lists and watches): no API object comes near.
inline constexpr size_t kMaxBufferedBody = size_t{64} << 20;

struct Target {
  bool tls = true;
  std::string host;  // without brackets
  std::string port;
  std::string authority;  // as written in the URL: the Host header
  std::string path;       // path and query
};

Result<Target> parse_url(const std::string& url);
std::string errno_text(int err);

// The connection's settings and its open socket, if any.
struct Link {
  std::string user_agent;
  ProxyEnv proxy_env;
  std::shared_ptr<TlsContext> tls_context;  // null when the server is plain http://
  // Opens connections instead of a TCP connect when set (HttpConnection::set_dialer).
  std::function<Result<int>(const std::string& host, const std::string& port)> dialer;

  // The open connection, if any, and where it goes.
  int fd = -1;
  std::unique_ptr<TlsSession> tls;
  std::string endpoint;  // "https://host:port" of the open connection
  std::string in;        // received, not yet consumed
  size_t in_pos = 0;

  ~Link() { close(); }
  Link() = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  void close() {
    tls.reset();
    if (fd >= 0) ::close(fd);
    fd = -1;
    endpoint.clear();
    in.clear();
    in_pos = 0;
  }

  // An idle kept-alive connection is usable unless the server closed it (or sent something unasked).
  [[nodiscard]] bool idle_connection_usable() const {
    if (fd < 0 || in_pos < in.size()) return false;
    pollfd p{fd, POLLIN, 0};
    while (true) {
      const int n = ::poll(&p, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      return n == 0;
    }
  }
};

// One request/response exchange: socket I/O that waits in slices of poll_interval, asking keep_going between
// them, and gives up at the transfer's deadline.
class Exchange {
 public:
  Exchange(Link& c, const HttpRequest& req, HttpResponse& resp)
      : c_(c),
        req_(req),
        resp_(resp),
        poll_(std::max<std::chrono::milliseconds>(std::chrono::milliseconds(1), req.poll_interval)) {
    if (req.timeout.count() > 0) deadline_ = std::chrono::steady_clock::now() + req.timeout;
  }

  // Sets the transfer's failure (the first one counts).
  bool fail(const std::string& why) {
    if (resp_.transport_error.empty() && !resp_.aborted) resp_.transport_error = why;
    return false;
  }
  [[nodiscard]] bool failed() const { return !resp_.transport_error.empty() || resp_.aborted; }
  void clear_failure() { resp_.transport_error.clear(); }

  // Asks the caller whether to go on, and enforces the transfer's deadline even when no wait was needed.
  bool keep_going() {
    if (req_.keep_going && !req_.keep_going()) {
      resp_.aborted = true;
      return false;
    }
    if (std::chrono::steady_clock::now() >= deadline_)
      return fail("timed out after " + std::to_string(req_.timeout.count()) + " ms");
    return true;
  }

  // Waits until the socket is ready for `events`, or the limit (default: the transfer's deadline) passes.
  bool wait(short events, std::optional<std::chrono::steady_clock::time_point> limit = std::nullopt) {
    const std::chrono::steady_clock::time_point until = limit ? std::min(*limit, deadline_) : deadline_;
    while (true) {
      if (!keep_going()) return false;
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) {
        if (until == deadline_)
          return fail("timed out after " + std::to_string(req_.timeout.count()) + " ms");
        return fail("connection timed out");
      }
      const auto slice = std::min<std::chrono::steady_clock::duration>(poll_, until - now);
      pollfd p{c_.fd, events, 0};
      const int n =
          ::poll(&p, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count()));
      if (n < 0 && errno != EINTR) return fail("poll: " + errno_text(errno));
      if (n > 0) return true;  // ready, or an error the next call reports
    }
  }

  // Connects to the target (through the proxy if one applies) and completes the TLS handshake.
  bool connect(const Target& t) {
    auto proxy = proxy_for(c_.proxy_env, t.host, t.port);
    if (!proxy) return fail(proxy.error().message);
    if (!t.tls) proxy->reset();  // HTTPS_PROXY is for https:// only
    const std::string& host = *proxy ? (*proxy)->host : t.host;
    const std::string& port = *proxy ? (*proxy)->port : t.port;
    if (!open_socket(host, port)) return false;
    if (*proxy && !tunnel(t)) return false;
    if (!t.tls) return true;
    if (!c_.tls_context) return fail("https:// request on a connection set up for plain http://");
    auto session = TlsSession::create(*c_.tls_context, c_.fd, t.host);
    if (!session) return fail(session.error().message);
    c_.tls = std::move(*session);
    const auto limit = std::chrono::steady_clock::now() + kConnectTimeout;
    while (true) {
      const int rc = c_.tls->handshake();
      if (rc == 0) {
        spdlog::debug("connected to {} port {}{}: {}{}", t.host, t.port, *proxy ? " through the proxy" : "",
                      c_.tls->describe(), c_.tls->resumed() ? " (session resumed)" : "");
        return true;
      }
      if (rc == TlsSession::kFailed) return fail(c_.tls->error());
      if (!wait(rc == TlsSession::kWantRead ? POLLIN : POLLOUT, limit)) return false;
    }
  }

  bool write_all(std::string_view data) {
    while (!data.empty()) {
      if (!keep_going()) return false;
      int n = 0;
      if (c_.tls) {
        n = c_.tls->write(data.data(), data.size());
        if (n == TlsSession::kFailed) return fail(c_.tls->error());
      } else {
        const ssize_t w = ::send(c_.fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return fail("send: " + errno_text(errno));
        n = w < 0 ? TlsSession::kWantWrite : static_cast<int>(w);
      }
      if (n == TlsSession::kWantRead || n == TlsSession::kWantWrite) {
        if (!wait(n == TlsSession::kWantRead ? POLLIN : POLLOUT)) return false;
        continue;
      }
      data.remove_prefix(static_cast<size_t>(n));
      written_ += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads more bytes into the buffer: false at the end of the connection (eof() tells) or on failure.
  bool fill() {
    if (c_.in_pos > 0 && c_.in_pos == c_.in.size()) {
      c_.in.clear();
      c_.in_pos = 0;
    } else if (c_.in_pos > kReadSize) {
      c_.in.erase(0, c_.in_pos);
      c_.in_pos = 0;
    }
    std::array<char, kReadSize> buf{};
    while (true) {
      if (!keep_going()) return false;
      int n = 0;
      if (c_.tls) {
        n = c_.tls->read(buf.data(), buf.size());
        if (n == TlsSession::kFailed) return fail(c_.tls->error());
      } else {
        const ssize_t r = ::recv(c_.fd, buf.data(), buf.size(), 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return fail("recv: " + errno_text(errno));
        n = r < 0 ? TlsSession::kWantRead : static_cast<int>(r);
      }
      if (n == TlsSession::kWantRead || n == TlsSession::kWantWrite) {
        if (!wait(n == TlsSession::kWantRead ? POLLIN : POLLOUT)) return false;
        continue;
      }
      if (n == 0) {
        eof_ = true;
        return false;
      }
      received_ += static_cast<size_t>(n);
      c_.in.append(buf.data(), static_cast<size_t>(n));
      return true;
    }
  }
  [[nodiscard]] bool eof() const { return eof_; }
  [[nodiscard]] size_t received() const { return received_; }
  [[nodiscard]] size_t written() const { return written_; }

  // One CRLF- (or LF-) terminated line without its terminator, at most kMaxLine long.
  bool read_line(std::string& line) {
    while (true) {
      const size_t nl = c_.in.find('\n', c_.in_pos);
      if (nl != std::string::npos) {
        if (nl - c_.in_pos > kMaxLine) return fail("response line too long");
        line.assign(c_.in, c_.in_pos, nl - c_.in_pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        c_.in_pos = nl + 1;
        return true;
      }
      if (c_.in.size() - c_.in_pos > kMaxLine) return fail("response line too long");
      if (!fill())
        return eof() ? fail("the server closed the connection in the middle of a response") : false;
    }
  }

  // Hands exactly `n` bytes (or, with n = npos, everything until the server closes) to `sink`.
  template <class Sink>
  bool read_body(size_t n, Sink&& sink) {
    while (n > 0) {
      if (c_.in_pos == c_.in.size() && !fill()) {
        if (eof() && n == std::string::npos) return true;
        return eof() ? fail("the server closed the connection in the middle of a response") : false;
      }
      const size_t take = std::min(n, c_.in.size() - c_.in_pos);
      const std::string_view piece(c_.in.data() + c_.in_pos, take);
      c_.in_pos += take;
      if (n != std::string::npos) n -= take;
      if (!sink(piece)) return false;
    }
    return true;
  }

  bool read_chunked(const std::function<bool(std::string_view)>& sink) {
    ChunkedDecoder decoder;
    while (!decoder.done()) {
      if (c_.in_pos == c_.in.size() && !fill())
        return eof() ? fail("the server closed the connection in the middle of a response") : false;
      auto taken = decoder.feed(std::string_view(c_.in).substr(c_.in_pos), sink);
      if (!taken) return fail(taken.error().message);
      c_.in_pos += *taken;
      if (decoder.stopped()) return false;
    }
    return true;
  }

 private:
  // The socket the connection's dialer gives, made non-blocking like the client's own.
  bool dialed_socket(const std::string& host, const std::string& port) {
    auto fd = c_.dialer(host, port);
    if (!fd) return fail("cannot connect to " + host + " port " + port + ": " + fd.error().message);
    c_.fd = *fd;
    const int flags = ::fcntl(c_.fd, F_GETFL);
    if (flags < 0 || ::fcntl(c_.fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      const int err = errno;
      c_.close();
      return fail("cannot connect to " + host + " port " + port + ": " + errno_text(err));
    }
    return true;
  }

  bool open_socket(const std::string& host, const std::string& port) {
    if (c_.dialer) return dialed_socket(host, port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    // Name resolution blocks and cannot be cancelled; the resolver's own timeouts bound it.
    const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
    if (rc != 0) return fail("cannot resolve " + host + ": " + gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(list, &freeaddrinfo);
    std::string last_error = "no address";
    for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
      // Each address gets a connect timeout of its own: one that never answers does not use up the next
      // one's time.
      const auto limit = std::chrono::steady_clock::now() + kConnectTimeout;
      c_.fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c_.fd < 0) {
        last_error = errno_text(errno);
        continue;
      }
      int rc2 = ::connect(c_.fd, ai->ai_addr, ai->ai_addrlen);
      if (rc2 < 0 && (errno == EINPROGRESS || errno == EINTR)) {
        if (!wait(POLLOUT, limit)) {
          if (resp_.aborted || std::chrono::steady_clock::now() >= deadline_) return false;
          last_error = resp_.transport_error;
          clear_failure();
          c_.close();
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c_.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc2 = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc2 == 0) {
        const int on = 1;
        const int idle = 30;
        const int interval = 10;
        // Requests are small writes: no Nagle delay. Keepalive probes find peers that vanished (watches).
        setsockopt(c_.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        setsockopt(c_.fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        setsockopt(c_.fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(c_.fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
        return true;
      }
      last_error = errno_text(errno);
      c_.close();
    }
    return fail("cannot connect to " + host + " port " + port + ": " + last_error);
  }

  // HTTP CONNECT through the proxy: afterwards the socket is a byte pipe to the target.
  bool tunnel(const Target& t) {
    const std::string hostport =
        (t.host.find(':') != std::string::npos ? "[" + t.host + "]" : t.host) + ":" + t.port;
    if (!write_all("CONNECT " + hostport + " HTTP/1.1\r\nHost: " + hostport +
                   "\r\nUser-Agent: " + c_.user_agent + "\r\n\r\n")) {
      return false;
    }
    std::string line;
    if (!read_line(line)) return false;
    const std::string status_line = line;
    size_t header_bytes = 0;
    do {
      if (!read_line(line)) return false;
      header_bytes += line.size();
      if (header_bytes > kMaxHeaderBytes) return fail("proxy response headers too long");
    } while (!line.empty());
    const size_t sp = status_line.find(' ');
    if (status_line.rfind("HTTP/1.", 0) != 0 || sp == std::string::npos ||
        status_line.compare(sp + 1, 1, "2") != 0) {
      return fail("the proxy refused CONNECT " + hostport + ": " + status_line.substr(0, 200));
    }
    if (c_.in_pos != c_.in.size()) return fail("the proxy sent data before the tunnel was set up");
    return true;
  }

  Link& c_;
  const HttpRequest& req_;
  HttpResponse& resp_;
  std::chrono::milliseconds poll_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  bool eof_ = false;
  size_t received_ = 0;
  size_t written_ = 0;
};

// Status line and header fields of the final response (1xx interim responses are skipped).
bool read_head(Exchange& x, HttpResponse& resp, ResponseHead& head);

}  // namespace dm::kube::http_detail
