// The HTTP/1.1 client against a loopback TLS server (mbedTLS, server side) run by the test: framing,
// streaming, keep-alive, cancellation, certificate checks and the CONNECT proxy path. Certificates:
// tests/fixtures/tls (README there).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_cache.h>
#include <mbedtls/x509_crt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "kube/http.h"
#include "kube/proxy.h"

namespace dm::kube {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kFixtures = std::string(DM_SOURCE_DIR) + "/tests/fixtures/tls/";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int random_bytes(void* /*unused*/, unsigned char* out, size_t len) {
  return getrandom(out, len, 0) == static_cast<ssize_t>(len) ? 0 : -1;
}

// What the server saw of one request.
struct Seen {
  std::string request_line;
  std::string headers;  // raw, lower-cased names kept as sent
  std::string body;
};

// One accepted connection of the test server: blocking TLS (or plain) reads and writes.
class ServerConn {
 public:
  ServerConn(mbedtls_ssl_context* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  bool write(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const int n =
          ssl_ != nullptr
              ? mbedtls_ssl_write(ssl_, reinterpret_cast<const unsigned char*>(s.data() + off),  // NOLINT
                                  s.size() - off)
              : static_cast<int>(::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL));
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads one request (headers and a Content-Length body); false when the client closed the connection.
  bool read_request(Seen& seen) {
    size_t end = 0;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!more()) return false;
    }
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    seen.request_line = head.substr(0, head.find("\r\n"));
    seen.headers = head;
    size_t length = 0;
    if (const size_t p = head.find("Content-Length: "); p != std::string::npos) {
      length = std::stoul(head.substr(p + 16));
    }
    while (buf_.size() < length) {
      if (!more()) return false;
    }
    seen.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return true;
  }
  // Blocks until the client closes its end.
  void wait_for_close() {
    while (more()) {
    }
  }
  [[nodiscard]] std::string peer_subject() const {
    if (ssl_ == nullptr) return {};
    const mbedtls_x509_crt* peer = mbedtls_ssl_get_peer_cert(ssl_);
    if (peer == nullptr) return {};
    std::array<char, 256> dn{};
    mbedtls_x509_dn_gets(dn.data(), dn.size(), &peer->subject);
    return dn.data();
  }

 private:
  bool more() {
    std::array<unsigned char, 4096> b{};
    const int n = ssl_ != nullptr ? mbedtls_ssl_read(ssl_, b.data(), b.size())
                                  : static_cast<int>(::recv(fd_, b.data(), b.size(), 0));
    if (n <= 0) return false;
    buf_.append(reinterpret_cast<const char*>(b.data()), static_cast<size_t>(n));  // NOLINT
    return true;
  }
  mbedtls_ssl_context* ssl_;
  int fd_;
  std::string buf_;
};

// Serves connections one at a time on a loopback port; `handle` answers each request and returns whether the
// connection stays open.
class TestServer {
 public:
  using Handler = std::function<bool(ServerConn&, const Seen&)>;
  struct Options {
    std::string bind = "127.0.0.1";
    bool tls = true;
    bool require_client_cert = false;
    bool resume_sessions = false;  // keep sessions by ID, so that a client may resume one
    bool concurrent = false;       // serve each connection on a thread of its own (else one at a time)
  };

  TestServer(Options opt, Handler handle) : opt_(std::move(opt)), handle_(std::move(handle)) {
    mbedtls_net_init(&listen_);
    mbedtls_ssl_config_init(&conf_);
    mbedtls_x509_crt_init(&cert_);
    mbedtls_x509_crt_init(&ca_);
    mbedtls_pk_init(&key_);
    EXPECT_EQ(mbedtls_x509_crt_parse_file(&cert_, (kFixtures + "server.crt").c_str()), 0);
    EXPECT_EQ(mbedtls_x509_crt_parse_file(&ca_, (kFixtures + "ca.crt").c_str()), 0);
    EXPECT_EQ(mbedtls_pk_parse_keyfile(&key_, (kFixtures + "server.key").c_str(), nullptr), 0);
    EXPECT_EQ(mbedtls_ssl_config_defaults(&conf_, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                          MBEDTLS_SSL_PRESET_DEFAULT),
              0);
    mbedtls_ssl_conf_rng(&conf_, random_bytes, nullptr);
    mbedtls_ssl_conf_ca_chain(&conf_, &ca_, nullptr);
    mbedtls_ssl_conf_authmode(
        &conf_, opt_.require_client_cert ? MBEDTLS_SSL_VERIFY_REQUIRED : MBEDTLS_SSL_VERIFY_NONE);
    EXPECT_EQ(mbedtls_ssl_conf_own_cert(&conf_, &cert_, &key_), 0);
    mbedtls_ssl_cache_init(&cache_);
    if (opt_.resume_sessions)
      mbedtls_ssl_conf_session_cache(&conf_, this, &TestServer::find_session, &store_session);
    EXPECT_EQ(mbedtls_net_bind(&listen_, opt_.bind.c_str(), "0", MBEDTLS_NET_PROTO_TCP), 0);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    getsockname(listen_.fd, reinterpret_cast<sockaddr*>(&addr), &len);  // NOLINT
    port_ = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);     // NOLINT
    thread_ = std::thread([this] { run(); });
  }
  ~TestServer() {
    stop_ = true;
    thread_.join();
    for (auto& w : workers_) w.join();
    mbedtls_net_free(&listen_);
    mbedtls_ssl_config_free(&conf_);
    mbedtls_x509_crt_free(&cert_);
    mbedtls_x509_crt_free(&ca_);
    mbedtls_pk_free(&key_);
    mbedtls_ssl_cache_free(&cache_);
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url(const std::string& host = "127.0.0.1") const {
    return (opt_.tls ? "https://" : "http://") + host + ":" + std::to_string(port_);
  }
  [[nodiscard]] int connections() const { return connections_; }
  [[nodiscard]] int handshakes() const { return handshakes_; }
  [[nodiscard]] int resumed() const { return resumed_; }  // handshakes that resumed a cached session

 private:
  static int find_session(void* self, mbedtls_ssl_session* session) {
    auto* s = static_cast<TestServer*>(self);
    const std::lock_guard lock(s->cache_mu_);
    const int rc = mbedtls_ssl_cache_get(&s->cache_, session);
    if (rc == 0) ++s->resumed_;
    return rc;
  }
  static int store_session(void* self, const mbedtls_ssl_session* session) {
    auto* s = static_cast<TestServer*>(self);
    const std::lock_guard lock(s->cache_mu_);
    return mbedtls_ssl_cache_set(&s->cache_, session);
  }
  void run() {
    while (!stop_) {
      pollfd p{listen_.fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      mbedtls_net_context client;
      mbedtls_net_init(&client);
      if (mbedtls_net_accept(&listen_, &client, nullptr, 0, nullptr) != 0) continue;
      ++connections_;
      if (opt_.concurrent) {
        workers_.emplace_back([this, client]() mutable {
          serve(client.fd);
          mbedtls_net_free(&client);
        });
        continue;
      }
      serve(client.fd);
      mbedtls_net_free(&client);
    }
  }
  void serve(int fd) {
    mbedtls_ssl_context ssl;
    mbedtls_ssl_init(&ssl);
    int fd_copy = fd;
    if (opt_.tls) {
      mbedtls_ssl_setup(&ssl, &conf_);
      mbedtls_ssl_set_bio(&ssl, &fd_copy, mbedtls_net_send, mbedtls_net_recv, nullptr);
      if (mbedtls_ssl_handshake(&ssl) != 0) {
        mbedtls_ssl_free(&ssl);
        return;
      }
      ++handshakes_;
    }
    ServerConn conn(opt_.tls ? &ssl : nullptr, fd);
    Seen seen;
    while (!stop_ && conn.read_request(seen) && handle_(conn, seen)) {
    }
    mbedtls_ssl_free(&ssl);
  }

  Options opt_;
  Handler handle_;
  mbedtls_net_context listen_{};
  mbedtls_ssl_config conf_{};
  mbedtls_x509_crt cert_{};
  mbedtls_x509_crt ca_{};
  mbedtls_pk_context key_{};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> handshakes_{0};
  std::atomic<int> resumed_{0};
  mbedtls_ssl_cache_context cache_{};
  std::mutex cache_mu_;
  std::thread thread_;
  std::vector<std::thread> workers_;  // concurrent: one per connection
};

// An HTTP CONNECT proxy on a loopback port: every tunnel goes to 127.0.0.1:`to_port`, whatever the client
// asked for (so a name that does not resolve proves the client went through here).
class ConnectProxy {
 public:
  explicit ConnectProxy(int to_port) : to_port_(to_port) {
    mbedtls_net_init(&listen_);
    EXPECT_EQ(mbedtls_net_bind(&listen_, "127.0.0.1", "0", MBEDTLS_NET_PROTO_TCP), 0);
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    getsockname(listen_.fd, reinterpret_cast<sockaddr*>(&addr), &len);  // NOLINT
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~ConnectProxy() {
    stop_ = true;
    thread_.join();
    mbedtls_net_free(&listen_);
  }
  ConnectProxy(const ConnectProxy&) = delete;
  ConnectProxy& operator=(const ConnectProxy&) = delete;
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string asked() {
    std::lock_guard lock(mu_);
    return asked_;
  }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listen_.fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      mbedtls_net_context client;
      mbedtls_net_init(&client);
      if (mbedtls_net_accept(&listen_, &client, nullptr, 0, nullptr) != 0) continue;
      tunnel(client.fd);
      mbedtls_net_free(&client);
    }
  }
  void tunnel(int fd) {
    std::string head;
    std::array<char, 1> c{};
    while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, c.data(), 1, 0) == 1) head += c[0];
    {
      std::lock_guard lock(mu_);
      asked_ = head.substr(0, head.find("\r\n"));
    }
    mbedtls_net_context up;
    mbedtls_net_init(&up);
    if (mbedtls_net_connect(&up, "127.0.0.1", std::to_string(to_port_).c_str(), MBEDTLS_NET_PROTO_TCP) != 0) {
      const std::string no = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
      ::send(fd, no.data(), no.size(), MSG_NOSIGNAL);
      return;
    }
    const std::string yes = "HTTP/1.1 200 Connection established\r\n\r\n";
    ::send(fd, yes.data(), yes.size(), MSG_NOSIGNAL);
    std::array<pollfd, 2> p{pollfd{fd, POLLIN, 0}, pollfd{up.fd, POLLIN, 0}};
    std::array<char, 4096> buf{};
    while (!stop_) {
      if (::poll(p.data(), 2, 20) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2; ++i) {
        if (p[i].revents == 0) continue;
        const ssize_t n = ::recv(p[i].fd, buf.data(), buf.size(), 0);
        if (n <= 0 || ::send(p[1 - i].fd, buf.data(), static_cast<size_t>(n), MSG_NOSIGNAL) != n)
          closed = true;
      }
      if (closed) break;
    }
    mbedtls_net_free(&up);
  }

  int to_port_;
  mbedtls_net_context listen_{};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string asked_;
  std::thread thread_;
};

std::string ok_response(const std::string& body, const std::string& extra_headers = "") {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

// Echoes the request line, the Authorization header and the body.
bool echo(ServerConn& conn, const Seen& seen) {
  std::string auth;
  if (const size_t p = seen.headers.find("Authorization: "); p != std::string::npos) {
    auth = seen.headers.substr(p + 15, seen.headers.find("\r\n", p) - p - 15);
  }
  return conn.write(ok_response(seen.request_line + "|" + auth + "|" + seen.body));
}

Config test_config(const std::string& server) {
  Config c;
  c.server = server;
  c.ca_data = read_file(kFixtures + "ca.crt");
  c.source = "test config";
  return c;
}

std::unique_ptr<HttpConnection> connect(const Config& config) {
  auto c = HttpConnection::create(config, "http-test");
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return c.ok() ? std::move(*c) : nullptr;
}

HttpRequest get(const std::string& url) {
  HttpRequest r;
  r.url = url;
  r.timeout = 30s;  // a safety net: no test waits for it
  return r;
}

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): before any client thread
  }
  ~ScopedEnv() { unsetenv(name_); }  // NOLINT(concurrency-mt-unsafe)
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST(KubeHttp, ContentLengthResponseWithTokenAndBody) {
  TestServer server({}, echo);
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/api/v1/pods?labelSelector=" + HttpConnection::escape("a=b c"));
  req.method = "POST";
  req.body = R"({"x":1})";
  req.content_type = "application/json";
  req.bearer_token = "secret-token";
  const HttpResponse resp = conn->perform(req);
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, R"(POST /api/v1/pods?labelSelector=a%3Db%20c HTTP/1.1|Bearer secret-token|{"x":1})");
}

TEST(KubeHttp, ChunkedResponseIsStreamedPieceByPiece) {
  std::mutex mu;
  std::condition_variable cv;
  bool first_seen = false;
  TestServer server({}, [&](ServerConn& conn, const Seen&) {
    conn.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nline1\n\r\n");
    {
      // The second piece is only sent once the client has handed the first one over: streaming, not
      // buffering.
      std::unique_lock lock(mu);
      cv.wait_for(lock, 20s, [&] { return first_seen; });
    }
    conn.write("6\r\nline2\n\r\n0\r\n\r\n");
    return true;
  });
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/watch");
  std::vector<std::string> pieces;
  req.on_body = [&](std::string_view piece) {
    pieces.emplace_back(piece);
    std::lock_guard lock(mu);
    first_seen = true;
    cv.notify_all();
    return true;
  };
  const HttpResponse resp = conn->perform(req);
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "");
  EXPECT_THAT(pieces, ::testing::ElementsAre("line1\n", "line2\n"));
}

TEST(KubeHttp, KeepAliveReusesTheConnection) {
  TestServer server({}, echo);
  auto conn = connect(test_config(server.url()));
  for (int i = 0; i < 3; ++i) {
    const HttpResponse resp = conn->perform(get(server.url() + "/n" + std::to_string(i)));
    EXPECT_EQ(resp.status, 200);
    EXPECT_THAT(resp.body, HasSubstr("GET /n" + std::to_string(i) + " "));
  }
  EXPECT_EQ(server.connections(), 1);
}

// The connections of one client share their TLS settings: the second and later connections resume the
// session the first one established instead of a full handshake. A connection with settings of its own
// starts afresh.
TEST(KubeHttp, ConnectionsSharingTlsSettingsResumeTheFirstSession) {
  TestServer server({.resume_sessions = true}, echo);
  auto shared = HttpConnection::tls_settings(test_config(server.url()));
  ASSERT_TRUE(shared) << shared.error().message;
  for (int i = 0; i < 3; ++i) {
    auto conn = HttpConnection::create("test", *shared);  // the server serves one connection at a time
    ASSERT_TRUE(conn) << conn.error().message;
    const HttpResponse resp = (*conn)->perform(get(server.url() + "/c" + std::to_string(i)));
    EXPECT_EQ(resp.status, 200) << resp.transport_error;
  }
  EXPECT_EQ(server.handshakes(), 3);
  EXPECT_EQ(server.resumed(), 2);

  const HttpResponse alone = connect(test_config(server.url()))->perform(get(server.url() + "/alone"));
  EXPECT_EQ(alone.status, 200) << alone.transport_error;
  EXPECT_EQ(server.handshakes(), 4);
  EXPECT_EQ(server.resumed(), 2);
}

TEST(KubeHttp, ConnectionsOpenedTogetherResumeTheFirstOnesSession) {
  // A run's first requests go out together: one of their connections shakes hands in full, the others
  // wait for its session and resume it.
  TestServer server({.resume_sessions = true, .concurrent = true}, echo);
  auto shared = HttpConnection::tls_settings(test_config(server.url()));
  ASSERT_TRUE(shared) << shared.error().message;
  constexpr int kConnections = 4;
  std::vector<std::unique_ptr<HttpConnection>> conns;
  for (int i = 0; i < kConnections; ++i) {
    auto conn = HttpConnection::create("test", *shared);
    ASSERT_TRUE(conn) << conn.error().message;
    conns.push_back(std::move(*conn));
  }
  std::vector<long> status(kConnections, 0);
  std::vector<std::thread> threads;
  threads.reserve(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    threads.emplace_back(
        [&, i] { status[i] = conns[i]->perform(get(server.url() + "/t" + std::to_string(i))).status; });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(status, ::testing::Each(200));
  EXPECT_EQ(server.handshakes(), kConnections);
  EXPECT_EQ(server.resumed(), kConnections - 1) << "one full handshake, the others resumed its session";
}

TEST(KubeHttp, ReconnectsWhenTheServerClosedTheConnection) {
  // The server closes after each response without announcing it (an idle timeout on its side), then once with
  // "Connection: close".
  std::atomic<int> n{0};
  TestServer server({}, [&](ServerConn& conn, const Seen& seen) {
    const bool announce = n++ == 1;
    conn.write(ok_response(seen.request_line, announce ? "Connection: close\r\n" : ""));
    return false;
  });
  auto conn = connect(test_config(server.url()));
  for (int i = 0; i < 3; ++i) {
    const HttpResponse resp = conn->perform(get(server.url() + "/r" + std::to_string(i)));
    EXPECT_EQ(resp.transport_error, "");
    EXPECT_EQ(resp.status, 200);
    EXPECT_THAT(resp.body, HasSubstr("GET /r" + std::to_string(i) + " "));
  }
  EXPECT_EQ(server.connections(), 3);
}

TEST(KubeHttp, KeepGoingCancelsAStreamThatNeverEnds) {
  std::atomic<bool> client_closed{false};
  TestServer server({}, [&](ServerConn& conn, const Seen& seen) {
    if (seen.request_line.find("/after") != std::string::npos) return echo(conn, seen);
    conn.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    conn.wait_for_close();  // never finishes the response
    client_closed = true;
    return false;
  });
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/watch");
  req.timeout = 0ms;
  req.poll_interval = 10ms;
  std::atomic<bool> got_data{false};
  int polls_after_data = 0;
  req.on_body = [&](std::string_view) {
    got_data = true;
    return true;
  };
  req.keep_going = [&] { return !got_data || ++polls_after_data < 3; };
  const HttpResponse resp = conn->perform(req);
  EXPECT_TRUE(resp.aborted);
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(polls_after_data, 3);
  // The aborted connection is closed, not reused: the next request opens a new one.
  EXPECT_EQ(conn->perform(get(server.url() + "/after")).status, 200);
  EXPECT_TRUE(client_closed);
  EXPECT_EQ(server.connections(), 2);
}

TEST(KubeHttp, OnBodyReturningFalseAborts) {
  TestServer server({}, [&](ServerConn& conn, const Seen&) {
    conn.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    conn.wait_for_close();
    return false;
  });
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/watch");
  req.on_body = [](std::string_view) { return false; };
  const HttpResponse resp = conn->perform(req);
  EXPECT_TRUE(resp.aborted);
}

TEST(KubeHttp, ExceptionFromOnBodyIsRethrown) {
  TestServer server({}, echo);
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/x");
  req.on_body = [](std::string_view) -> bool { throw std::runtime_error("handler failed"); };
  EXPECT_THROW(conn->perform(req), std::runtime_error);
  // The connection is still usable afterwards.
  EXPECT_EQ(conn->perform(get(server.url() + "/y")).status, 200);
}

TEST(KubeHttp, WholeTransferTimeout) {
  TestServer server({}, [&](ServerConn& conn, const Seen&) {
    conn.wait_for_close();  // never answers
    return false;
  });
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/slow");
  req.timeout = 200ms;
  const HttpResponse resp = conn->perform(req);
  EXPECT_FALSE(resp.aborted);
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("timed out"));
}

TEST(KubeHttp, ErrorBodiesAreBufferedAndRetryAfterIsKept) {
  TestServer server({}, [&](ServerConn& conn, const Seen&) {
    const std::string body = R"({"kind":"Status","code":429})";
    return conn.write("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  auto conn = connect(test_config(server.url()));
  HttpRequest req = get(server.url() + "/busy");
  bool streamed = false;
  req.on_body = [&](std::string_view) { return streamed = true; };
  const HttpResponse resp = conn->perform(req);
  EXPECT_EQ(resp.status, 429);
  EXPECT_EQ(resp.retry_after, "7");
  EXPECT_EQ(resp.body, R"({"kind":"Status","code":429})");
  EXPECT_FALSE(streamed);
}

TEST(KubeHttp, ClientCertificateAuthentication) {
  TestServer server({.require_client_cert = true}, [](ServerConn& conn, const Seen&) {
    return conn.write(ok_response(conn.peer_subject()));
  });
  Config with = test_config(server.url());
  with.client_cert_file = kFixtures + "client.crt";
  with.client_key_data = read_file(kFixtures + "client.key");
  const HttpResponse resp = connect(with)->perform(get(server.url() + "/whoami"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.body, "CN=test-admin");

  const HttpResponse refused = connect(test_config(server.url()))->perform(get(server.url() + "/whoami"));
  EXPECT_EQ(refused.status, 0);
  EXPECT_NE(refused.transport_error, "");
}

TEST(KubeHttp, CertificateMustBeFromTheConfiguredCa) {
  TestServer server({}, echo);
  Config other = test_config(server.url());
  other.ca_data.clear();
  other.ca_file = kFixtures + "other-ca.crt";
  const HttpResponse resp = connect(other)->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("not trusted"));
  EXPECT_EQ(server.handshakes(), 0);

  Config insecure = other;
  insecure.insecure_skip_tls_verify = true;
  EXPECT_EQ(connect(insecure)->perform(get(server.url() + "/")).status, 200);
}

TEST(KubeHttp, IpAddressSanIsVerified) {
  TestServer v4({}, echo);
  EXPECT_EQ(connect(test_config(v4.url()))->perform(get(v4.url() + "/")).status, 200);

  // 127.0.0.2 is a loopback address too, but not in the certificate.
  TestServer other({.bind = "127.0.0.2"}, echo);
  const HttpResponse resp =
      connect(test_config(other.url("127.0.0.2")))->perform(get(other.url("127.0.0.2") + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("not valid for IP address 127.0.0.2"));
}

TEST(KubeHttp, Ipv6LiteralWithSan) {
  TestServer server({.bind = "::1"}, echo);
  const std::string url = "https://[::1]:" + std::to_string(server.port());
  const HttpResponse resp = connect(test_config(url))->perform(get(url + "/v6"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
}

TEST(KubeHttp, DnsNameSanIsVerified) {
  TestServer server({}, echo);
  const std::string url = server.url("localhost");
  const HttpResponse resp = connect(test_config(url))->perform(get(url + "/name"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
}

TEST(KubeHttp, ThroughAnHttpsProxyWithConnect) {
  TestServer server({}, echo);
  ConnectProxy proxy(server.port());
  const ScopedEnv env("HTTPS_PROXY", "http://127.0.0.1:" + std::to_string(proxy.port()));
  // apiserver.test does not resolve: only the proxy can reach it (it tunnels everything to the test server).
  const std::string url = "https://apiserver.test:6443";
  auto conn = connect(test_config(url));
  HttpResponse resp = conn->perform(get(url + "/via-proxy"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(proxy.asked(), "CONNECT apiserver.test:6443 HTTP/1.1");
  resp = conn->perform(get(url + "/again"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(server.connections(), 1);  // the tunnel is kept alive like any connection
  conn.reset();                        // the test proxy and server serve one connection at a time

  // The certificate is still checked end to end: a name it does not list is refused.
  const std::string wrong = "https://wrong.test:6443";
  resp = connect(test_config(wrong))->perform(get(wrong + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("not trusted"));
  EXPECT_EQ(proxy.asked(), "CONNECT wrong.test:6443 HTTP/1.1");
}

TEST(KubeHttp, NoProxyGoesDirect) {
  TestServer server({}, echo);
  ConnectProxy proxy(server.port());
  const ScopedEnv env("HTTPS_PROXY", "127.0.0.1:" + std::to_string(proxy.port()));
  const ScopedEnv no("NO_PROXY", "example.com,.test");
  const std::string url = "https://apiserver.test:6443";
  const HttpResponse resp = connect(test_config(url))->perform(get(url + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("cannot resolve apiserver.test"));
  EXPECT_EQ(proxy.asked(), "");
}

TEST(KubeHttp, PlainHttp) {
  TestServer server({.tls = false}, echo);
  Config c;
  c.server = server.url();
  const HttpResponse resp = connect(c)->perform(get(server.url() + "/plain"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_THAT(resp.body, HasSubstr("GET /plain HTTP/1.1"));
}

TEST(KubeHttp, TransportErrorsAreText) {
  // A port nobody listens on: bind one, then close it.
  int port = 0;
  {
    TestServer gone({}, echo);
    port = gone.port();
  }
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  const HttpResponse resp = connect(test_config(url))->perform(get(url + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("cannot connect to 127.0.0.1 port " + std::to_string(port)));
  EXPECT_THAT(resp.transport_error, HasSubstr("refused"));
}

TEST(KubeHttp, BadCaIsAClearError) {
  Config c = test_config("https://127.0.0.1:1");
  c.ca_data = "not a certificate";
  auto conn = HttpConnection::create(c, "http-test");
  ASSERT_FALSE(conn.ok());
  EXPECT_THAT(conn.error().message,
              HasSubstr("TLS setup for test config: cannot use certificate-authority-data"));
}

TEST(KubeHttp, HeaderValuesWithLineBreaksAreRefused) {
  TestServer server({}, echo);
  HttpRequest req = get(server.url() + "/");
  req.bearer_token = "abc\r\nX-Injected: 1";
  const HttpResponse resp = connect(test_config(server.url()))->perform(req);
  EXPECT_THAT(resp.transport_error, HasSubstr("line break"));
  EXPECT_EQ(server.connections(), 0);
}

TEST(KubeProxy, WhichHostsUseTheProxy) {
  const ProxyEnv env{"http://proxy.corp:3128",
                     "example.com, .internal,10.0.0.0/8,192.168.1.5,svc:8443,[fd00::1]"};
  auto via = [&](const char* host, const char* port = "443") {
    auto r = proxy_for(env, host, port);
    EXPECT_TRUE(r.ok());
    return r.ok() && r->has_value();
  };
  EXPECT_TRUE(via("api.cluster.io"));
  EXPECT_FALSE(via("example.com"));
  EXPECT_FALSE(via("API.Example.com"));  // subdomains, any case
  EXPECT_TRUE(via("notexample.com"));
  EXPECT_FALSE(via("a.internal"));
  EXPECT_TRUE(via("internal"));  // ".internal": subdomains only
  EXPECT_FALSE(via("10.96.0.1"));
  EXPECT_TRUE(via("11.0.0.1"));
  EXPECT_FALSE(via("192.168.1.5"));
  EXPECT_TRUE(via("192.168.1.6"));
  EXPECT_FALSE(via("svc", "8443"));
  EXPECT_TRUE(via("svc", "443"));  // the entry names a port
  EXPECT_FALSE(via("fd00::1"));
  EXPECT_FALSE(via("127.0.0.1"));  // loopback and localhost always direct
  EXPECT_FALSE(via("::1"));
  EXPECT_FALSE(via("localhost"));

  const auto p = proxy_for(env, "api.cluster.io", "443");
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->host, "proxy.corp");
  EXPECT_EQ((*p)->port, "3128");
  EXPECT_EQ((*proxy_for({"proxy.corp", ""}, "a", "443"))->port, "80");
  EXPECT_FALSE(proxy_for({"http://proxy:1", "*"}, "a", "443")->has_value());
  EXPECT_FALSE(proxy_for({"", ""}, "a", "443")->has_value());
}

TEST(KubeProxy, UnusableProxySettingsAreErrors) {
  EXPECT_THAT(proxy_for({"https://proxy:1", ""}, "a", "443").error().message,
              HasSubstr("only http:// proxies"));
  EXPECT_THAT(proxy_for({"socks5://proxy:1", ""}, "a", "443").error().message,
              HasSubstr("only http:// proxies"));
  EXPECT_THAT(proxy_for({"http://u:p@proxy:1", ""}, "a", "443").error().message, HasSubstr("credentials"));
}

TEST(KubeProxy, UpperCaseEnvironmentWins) {
  const ScopedEnv lower("https_proxy", "http://lower:1");
  EXPECT_EQ(proxy_env_from_environment().https_proxy, "http://lower:1");
  const ScopedEnv upper("HTTPS_PROXY", "http://upper:2");
  const ScopedEnv no("no_proxy", ".lower");
  EXPECT_EQ(proxy_env_from_environment().https_proxy, "http://upper:2");
  EXPECT_EQ(proxy_env_from_environment().no_proxy, ".lower");
}

}  // namespace
}  // namespace dm::kube
