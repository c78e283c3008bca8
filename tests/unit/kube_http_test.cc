// The HTTP/1.1 client against a loopback TLS server (OpenSSL, server side) run by the test: framing,
// streaming, keep-alive, cancellation, certificate checks, protocol versions and cipher suites, and the
// CONNECT proxy path. Certificates: tests/fixtures/tls (README there), and some made at test time with the
// openssl command (cases the fixtures do not cover: no subjectAltName, an RSA key, an unknown client CA).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "kube/http.h"
#include "kube/http_exchange.h"
#include "kube/http_parse.h"
#include "kube/proxy.h"
#include "support/process.h"

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

// Certificates made once per test process with the openssl command, in a temporary directory:
//   gen-ca.crt                    a CA of its own (EC P-256)
//   cn-only.crt/.key              CN=localhost, no subjectAltName, from gen-ca
//   rsa.crt/.key                  RSA 2048, subjectAltName IP:127.0.0.1, from gen-ca
//   stranger.crt/.key             a client certificate (CN=stranger) from gen-ca, which the test server
//                                 does not trust for clients
const std::string& generated() {
  static const std::string dir = [] {
    std::string d = test::make_temp_dir("kube-http-certs") + "/";
    auto openssl = [&](const std::vector<std::string>& args) {
      std::vector<std::string> argv{"openssl"};
      argv.insert(argv.end(), args.begin(), args.end());
      const auto r = test::run_command(argv);
      EXPECT_EQ(r.exit_code, 0) << r.err;
    };
    openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", "/CN=generated test CA", "-keyout", d + "gen-ca.key", "-out", d + "gen-ca.crt"});
    const auto leaf = [&](const std::string& name, const std::vector<std::string>& key,
                          const std::string& subj, const std::string& ext) {
      std::vector<std::string> req{
          "req", "-new", "-nodes", "-subj", subj, "-keyout", d + name + ".key", "-out", d + name + ".csr"};
      req.insert(req.end(), key.begin(), key.end());
      openssl(req);
      test::write_file(d + name + ".ext", ext);
      openssl({"x509", "-req", "-in", d + name + ".csr", "-CA", d + "gen-ca.crt", "-CAkey", d + "gen-ca.key",
               "-CAcreateserial", "-days", "2", "-extfile", d + name + ".ext", "-out", d + name + ".crt"});
    };
    const std::vector<std::string> ec{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"};
    leaf("cn-only", ec, "/CN=localhost", "basicConstraints=CA:FALSE\n");
    leaf("rsa", {"-newkey", "rsa:2048"}, "/CN=rsa-apiserver", "subjectAltName=IP:127.0.0.1\n");
    leaf("stranger", ec, "/CN=stranger", "extendedKeyUsage=clientAuth\n");
    return d;
  }();
  return dir;
}

// A listening TCP socket on `address`, port chosen by the kernel.
int listen_on(const std::string& address, int& port) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  EXPECT_EQ(getaddrinfo(address.c_str(), "0", &hints, &ai), 0);
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::bind(fd, ai->ai_addr, ai->ai_addrlen), 0);
  freeaddrinfo(ai);
  EXPECT_EQ(::listen(fd, 16), 0);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);                                   // NOLINT
  port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port  // NOLINT
                                          : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);  // NOLINT
  return fd;
}

// Accepts one connection if one arrives within a short poll; -1 otherwise.
int accept_one(int listen_fd) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, 20) <= 0) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
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
  ServerConn(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  bool write(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const int n = ssl_ != nullptr
                        ? SSL_write(ssl_, s.data() + off, static_cast<int>(s.size() - off))
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
    X509* peer = SSL_get1_peer_certificate(ssl_);
    if (peer == nullptr) return {};
    std::array<char, 256> dn{};
    X509_NAME_oneline(X509_get_subject_name(peer), dn.data(), static_cast<int>(dn.size()));
    X509_free(peer);
    return dn.data();
  }

 private:
  bool more() {
    std::array<char, 4096> b{};
    const int n = ssl_ != nullptr ? SSL_read(ssl_, b.data(), static_cast<int>(b.size()))
                                  : static_cast<int>(::recv(fd_, b.data(), b.size(), 0));
    if (n <= 0) return false;
    buf_.append(b.data(), static_cast<size_t>(n));
    return true;
  }
  SSL* ssl_;
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
    bool resume_sessions = false;  // grant sessions, so that a client may resume one
    bool concurrent = false;       // serve each connection on a thread of its own (else one at a time)
    int min_version = 0;           // TLS1_2_VERSION, ...; 0 = OpenSSL's default
    int max_version = 0;
    std::string ciphers{};  // TLS 1.2 and older cipher list; "" = OpenSSL's default
    std::string cert = kFixtures + "server.crt";
    std::string key = kFixtures + "server.key";
  };

  TestServer(Options opt, Handler handle) : opt_(std::move(opt)), handle_(std::move(handle)) {
    std::signal(SIGPIPE, SIG_IGN);  // the server's writes to a client that went away
    ctx_ = SSL_CTX_new(TLS_server_method());
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx_, opt_.cert.c_str()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx_, opt_.key.c_str(), SSL_FILETYPE_PEM), 1);
    if (opt_.require_client_cert) {
      EXPECT_EQ(SSL_CTX_load_verify_locations(ctx_, (kFixtures + "ca.crt").c_str(), nullptr), 1);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    if (opt_.min_version != 0) SSL_CTX_set_min_proto_version(ctx_, opt_.min_version);
    if (opt_.max_version != 0) SSL_CTX_set_max_proto_version(ctx_, opt_.max_version);
    if (!opt_.ciphers.empty()) {
      EXPECT_EQ(SSL_CTX_set_cipher_list(ctx_, opt_.ciphers.c_str()), 1);
    }
    if (!opt_.resume_sessions) {
      SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
      SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET);
      SSL_CTX_set_num_tickets(ctx_, 0);
    }
    listen_ = listen_on(opt_.bind, port_);
    thread_ = std::thread([this] { run(); });
  }
  ~TestServer() {
    stop_ = true;
    thread_.join();
    for (auto& w : workers_) w.join();
    ::close(listen_);
    SSL_CTX_free(ctx_);
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url(const std::string& host = "127.0.0.1") const {
    return (opt_.tls ? "https://" : "http://") + host + ":" + std::to_string(port_);
  }
  [[nodiscard]] int connections() const { return connections_; }
  [[nodiscard]] int handshakes() const { return handshakes_; }
  [[nodiscard]] int resumed() const { return resumed_; }  // handshakes that resumed an earlier session
  // The protocol version and the name the client asked for (SNI) of the last completed handshake.
  [[nodiscard]] std::string version() {
    const std::lock_guard lock(mu_);
    return version_;
  }
  [[nodiscard]] std::string server_name() {
    const std::lock_guard lock(mu_);
    return server_name_;
  }

 private:
  void run() {
    while (!stop_) {
      const int fd = accept_one(listen_);
      if (fd < 0) continue;
      ++connections_;
      if (opt_.concurrent) {
        workers_.emplace_back([this, fd] { serve(fd); });
        continue;
      }
      serve(fd);
    }
  }
  void serve(int fd) {
    SSL* ssl = nullptr;
    if (opt_.tls) {
      ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      if (SSL_accept(ssl) != 1) {
        ERR_clear_error();
        SSL_free(ssl);
        ::close(fd);
        return;
      }
      ++handshakes_;
      if (SSL_session_reused(ssl) == 1) ++resumed_;
      const std::lock_guard lock(mu_);
      version_ = SSL_get_version(ssl);
      const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
      server_name_ = sni != nullptr ? sni : "";
    }
    ServerConn conn(ssl, fd);
    Seen seen;
    while (!stop_ && conn.read_request(seen) && handle_(conn, seen)) {
    }
    if (ssl != nullptr) SSL_shutdown(ssl);
    SSL_free(ssl);
    ERR_clear_error();
    ::close(fd);
  }

  Options opt_;
  Handler handle_;
  SSL_CTX* ctx_ = nullptr;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> handshakes_{0};
  std::atomic<int> resumed_{0};
  std::mutex mu_;
  std::string version_;
  std::string server_name_;
  std::thread thread_;
  std::vector<std::thread> workers_;  // concurrent: one per connection
};

// An HTTP CONNECT proxy on a loopback port: every tunnel goes to 127.0.0.1:`to_port`, whatever the client
// asked for (so a name that does not resolve proves the client went through here).
class ConnectProxy {
 public:
  explicit ConnectProxy(int to_port) : to_port_(to_port) {
    listen_ = listen_on("127.0.0.1", port_);
    thread_ = std::thread([this] { run(); });
  }
  ~ConnectProxy() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
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
      const int fd = accept_one(listen_);
      if (fd < 0) continue;
      tunnel(fd);
      ::close(fd);
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
    const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(to_port_));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(up, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {  // NOLINT
      const std::string no = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
      ::send(fd, no.data(), no.size(), MSG_NOSIGNAL);
      ::close(up);
      return;
    }
    const std::string yes = "HTTP/1.1 200 Connection established\r\n\r\n";
    ::send(fd, yes.data(), yes.size(), MSG_NOSIGNAL);
    std::array<pollfd, 2> p{pollfd{fd, POLLIN, 0}, pollfd{up, POLLIN, 0}};
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
    ::close(up);
  }

  int to_port_;
  int listen_ = -1;
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

// The server answers the first request, then reads the second on the same kept-alive connection and
// closes it without answering (as when its idle timeout strikes just as the request arrives). Later requests
// get answers.
class DropsTheSecondRequest {
 public:
  bool operator()(ServerConn& conn, const Seen& seen) {
    const std::lock_guard lock(mu_);
    seen_.push_back(
        seen.request_line.substr(0, seen.request_line.find(' ', seen.request_line.find(' ') + 1)));
    if (seen_.size() == 2) return false;
    return conn.write(ok_response(seen.request_line));
  }
  std::vector<std::string> seen() {
    const std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
};

TEST(KubeHttp, AReadIsSentAgainWhenTheServerDroppedTheKeptAliveConnection) {
  DropsTheSecondRequest handler;
  TestServer server({}, std::ref(handler));
  auto conn = connect(test_config(server.url()));
  EXPECT_EQ(conn->perform(get(server.url() + "/first")).status, 200);
  const HttpResponse resp = conn->perform(get(server.url() + "/read"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
  EXPECT_THAT(handler.seen(), ::testing::ElementsAre("GET /first", "GET /read", "GET /read"));
  EXPECT_EQ(server.connections(), 2);
}

TEST(KubeHttp, AWriteIsNeverSentAgainByTheConnection) {
  for (const char* method : {"POST", "PATCH", "PUT", "DELETE"}) {
    SCOPED_TRACE(method);
    DropsTheSecondRequest handler;
    TestServer server({}, std::ref(handler));
    auto conn = connect(test_config(server.url()));
    EXPECT_EQ(conn->perform(get(server.url() + "/first")).status, 200);
    HttpRequest write = get(server.url() + "/write");
    write.method = method;
    write.body = "{}";
    const HttpResponse resp = conn->perform(write);
    EXPECT_EQ(resp.status, 0);
    EXPECT_THAT(resp.transport_error,
                HasSubstr("the server closed the connection in the middle of a response"));
    EXPECT_TRUE(resp.request_sent) << "the caller must know that the write may have happened";
    EXPECT_THAT(handler.seen(), ::testing::ElementsAre("GET /first", std::string(method) + " /write"));
    EXPECT_EQ(server.connections(), 1);
  }
}

TEST(KubeHttp, ARequestThatNeverLeftSaysSo) {
  int port = 0;
  {
    TestServer gone({}, echo);
    port = gone.port();
  }
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  HttpRequest write = get(url + "/");
  write.method = "POST";
  const HttpResponse resp = connect(test_config(url))->perform(write);
  EXPECT_EQ(resp.status, 0);
  EXPECT_FALSE(resp.request_sent);
}

TEST(KubeHttp, ADialerGivesTheConnectionItsSocket) {
  // The dialer is asked for the URL's host and port; its socket carries the exchange as a TCP one would:
  // the request arrives on the other end, the answer written there before comes back, and the end of the
  // answer is the end of the body.
  int peer = -1;
  std::vector<std::string> dialed;
  Config config;
  config.server = "http://api.example";
  auto conn = HttpConnection::create(config, "dial-test");
  ASSERT_TRUE(conn);
  (*conn)->set_dialer([&](const std::string& host, const std::string& port) -> Result<int> {
    dialed.push_back(host + ":" + port);
    std::array<int, 2> fds{};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()) != 0) return Error("socketpair");
    const std::string answer = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"kind\":\"Pod\"}";
    EXPECT_EQ(::send(fds[1], answer.data(), answer.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(answer.size()));
    ::shutdown(fds[1], SHUT_WR);
    peer = fds[1];
    return fds[0];
  });
  const HttpResponse resp = (*conn)->perform(get("http://api.example:8080/api/v1/pods"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, R"({"kind":"Pod"})");
  EXPECT_THAT(dialed, ::testing::ElementsAre("api.example:8080"));
  ASSERT_GE(peer, 0);
  std::array<char, 4096> buf{};
  const ssize_t n = ::recv(peer, buf.data(), buf.size(), MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  EXPECT_THAT(std::string(buf.data(), static_cast<size_t>(n)),
              ::testing::StartsWith("GET /api/v1/pods HTTP/1.1\r\n"));
  ::close(peer);

  // A dialer that has no socket fails the request before anything was sent.
  (*conn)->set_dialer(
      [](const std::string&, const std::string&) -> Result<int> { return Error("no route"); });
  const HttpResponse refused = (*conn)->perform(get("http://api.example/api/v1/pods"));
  EXPECT_EQ(refused.status, 0);
  EXPECT_FALSE(refused.request_sent);
  EXPECT_THAT(refused.transport_error, HasSubstr("cannot connect to api.example port 80: no route"));
}

// Answers every request with the same raw response, then closes.
TestServer::Handler answer(std::string raw) {
  return [raw = std::move(raw)](ServerConn& conn, const Seen&) {
    conn.write(raw);
    return false;
  };
}

TEST(KubeHttp, AmbiguousResponsesAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\n folded\r\n\r\n{}", "obsolete line folding"},
      {"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}", "whitespace before the colon"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}  ",
       "conflicting Content-Length values"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}  ", "conflicting Content-Length values"},
      {"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}", "bad Content-Length"},
      {"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n{}", "without a colon"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "transfer coding after chunked"},
      {"HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP/1.x response"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"},
  };
  for (const auto& [raw, why] : cases) {
    SCOPED_TRACE(raw);
    TestServer server({}, answer(raw));
    const HttpResponse resp = connect(test_config(server.url()))->perform(get(server.url() + "/"));
    EXPECT_THAT(resp.transport_error, HasSubstr(why));
  }
}

TEST(KubeHttp, RepeatedEqualContentLengthIsAccepted) {
  TestServer server({}, answer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"));
  const HttpResponse resp = connect(test_config(server.url()))->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.body, "{}");
}

TEST(KubeHttp, ABodyWhoseCodingsDoNotEndInChunkedRunsToTheClose) {
  // Transfer-Encoding wins over Content-Length; a coding other than chunked last: read until the close.
  TestServer server({}, answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\n"
                               "{\"all\":\"of it\"}"));
  auto conn = connect(test_config(server.url()));
  const HttpResponse resp = conn->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.body, R"({"all":"of it"})");
}

TEST(KubeHttp, AnOversizedBufferedBodyIsAClearError) {
  TestServer server({}, answer("HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n{}"));
  const HttpResponse resp = connect(test_config(server.url()))->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.status, 200);
  EXPECT_THAT(resp.transport_error, HasSubstr("larger than 64 MiB, the most this client holds in memory"));
}

TEST(KubeHttp, RequestPathsWithLineBreaksAreRefused) {
  TestServer server({}, echo);
  const HttpResponse resp =
      connect(test_config(server.url()))->perform(get(server.url() + "/x HTTP/1.1\r\nX-Injected: 1\r\n"));
  EXPECT_THAT(resp.transport_error, HasSubstr("the request path contains a line break"));
  EXPECT_EQ(server.connections(), 0);
}

TEST(KubeHttp, AServerUrlWhoseHostCouldSplitTheRequestIsRefused) {
  // The host goes into the Host header: a line break there would add header fields of its own.
  TestServer server({}, echo);
  const std::string port = server.url().substr(server.url().rfind(':'));
  const HttpResponse resp =
      connect(test_config(server.url()))->perform(get("http://127.0.0.1\r\nX-Injected" + port + "/x"));
  EXPECT_THAT(resp.transport_error, HasSubstr("bad URL host"));
  EXPECT_EQ(server.connections(), 0);
  for (const char* bad : {"https://a b:6443", "https://ho[st:6443", "https://host:64a3",
                          "https://[::1]x:6443", "https://host:123456", "https://user@host", "ftp://host"}) {
    EXPECT_FALSE(dm::kube::http_detail::parse_url(bad).ok()) << bad;
  }
}

TEST(KubeHttp, AServerUrlKeepsItsPathPrefixAndAQueryStartsTheRootPath) {
  auto prefixed =
      dm::kube::http_detail::parse_url("https://rancher.example:443/k8s/clusters/c-1/api/v1/nodes");
  ASSERT_TRUE(prefixed.ok());
  EXPECT_EQ(prefixed->host, "rancher.example");
  EXPECT_EQ(prefixed->path, "/k8s/clusters/c-1/api/v1/nodes");
  auto query = dm::kube::http_detail::parse_url("http://[fe80::1%25eth0]?watch=1");
  ASSERT_TRUE(query.ok());
  EXPECT_EQ(query->host, "fe80::1%25eth0");
  EXPECT_EQ(query->port, "80");
  EXPECT_EQ(query->authority, "[fe80::1%25eth0]");
  EXPECT_EQ(query->path, "/?watch=1");
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
  EXPECT_EQ(resp.body, "/CN=test-admin");

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
  EXPECT_THAT(resp.transport_error,
              HasSubstr("the certificate of the API server at 127.0.0.1 is not trusted: it was issued by "
                        "CN=driver-manager test CA, which is not a CA of the certificate-authority " +
                        kFixtures + "other-ca.crt"));
  EXPECT_EQ(server.handshakes(), 0);

  Config insecure = other;
  insecure.ca_file.clear();
  insecure.insecure_skip_tls_verify = true;
  EXPECT_EQ(connect(insecure)->perform(get(server.url() + "/")).status, 200);

  // Both together: refused, as kubectl does (the CA would silently not be used).
  insecure.ca_file = kFixtures + "ca.crt";
  auto both = HttpConnection::create(insecure, "http-test");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.error().message,
              HasSubstr("insecure-skip-tls-verify and a certificate authority together"));
}

TEST(KubeTls, ServersOfferingOnlyTls12OrOnlyTls13) {
  for (const auto& [version, name] :
       {std::pair{TLS1_2_VERSION, "TLSv1.2"}, std::pair{TLS1_3_VERSION, "TLSv1.3"}}) {
    SCOPED_TRACE(name);
    TestServer server({.min_version = version, .max_version = version}, echo);
    const HttpResponse resp = connect(test_config(server.url()))->perform(get(server.url() + "/"));
    EXPECT_EQ(resp.transport_error, "");
    EXPECT_EQ(resp.status, 200);
    EXPECT_EQ(server.version(), name);
  }
}

TEST(KubeTls, ServerOfferingOnlyCbcSuitesIsRefused) {
  TestServer server({.max_version = TLS1_2_VERSION,
                     .ciphers = "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384:ECDHE-ECDSA-AES128-SHA"},
                    echo);
  const HttpResponse resp = connect(test_config(server.url()))->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error,
              HasSubstr("TLS handshake with 127.0.0.1: the API server at 127.0.0.1 and this client have no "
                        "cipher suite or key exchange group in common (this client speaks TLS 1.2 and 1.3"));
  EXPECT_EQ(server.handshakes(), 0);
}

TEST(KubeTls, ServerOfferingOnlyStaticRsaKeyExchangeIsRefused) {
  const std::string& d = generated();
  TestServer server({.max_version = TLS1_2_VERSION,
                     .ciphers = "AES128-GCM-SHA256:AES256-GCM-SHA384",
                     .cert = d + "rsa.crt",
                     .key = d + "rsa.key"},
                    echo);
  Config c = test_config(server.url());
  c.ca_data = read_file(d + "gen-ca.crt");
  const HttpResponse resp = connect(c)->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("have no cipher suite or key exchange group in common"));
  EXPECT_EQ(server.handshakes(), 0);

  // The same server with ECDHE: accepted (the refusal was the key exchange, not the RSA certificate).
  TestServer ecdhe({.max_version = TLS1_2_VERSION, .cert = d + "rsa.crt", .key = d + "rsa.key"}, echo);
  EXPECT_EQ(connect(c)->perform(get(ecdhe.url() + "/")).status, 200);
}

TEST(KubeTls, ServerWithoutTls12Or13IsNamedAsSuch) {
  TestServer server({.max_version = TLS1_1_VERSION, .ciphers = "DEFAULT:@SECLEVEL=0"}, echo);
  const HttpResponse resp = connect(test_config(server.url()))->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error,
              HasSubstr("the API server at 127.0.0.1 offers no TLS version this client supports"));
}

TEST(KubeTls, CertificateWithoutTheNameIsRefused) {
  TestServer server({}, echo);
  // The certificate lists localhost and apiserver.test: a name it does not list is refused, and the error
  // says what it lists.
  Config c = test_config(server.url());
  c.tls_server_name = "wrong.test";
  const HttpResponse resp = connect(c)->perform(get(server.url() + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error,
              HasSubstr("the certificate of the API server at 127.0.0.1 is not valid for the name wrong.test "
                        "(it lists IP:127.0.0.1, IP:::1, DNS:localhost, DNS:apiserver.test)"));
}

TEST(KubeTls, TlsServerNameIsCheckedAndSentInsteadOfTheAddress) {
  // 127.0.0.2 is not in the certificate, but the kubeconfig's tls-server-name is.
  TestServer server({.bind = "127.0.0.2"}, echo);
  Config c = test_config(server.url("127.0.0.2"));
  c.tls_server_name = "apiserver.test";
  const HttpResponse resp = connect(c)->perform(get(server.url("127.0.0.2") + "/"));
  EXPECT_EQ(resp.transport_error, "");
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(server.server_name(), "apiserver.test");
}

TEST(KubeTls, CommonNameIsNeverTakenForTheName) {
  const std::string& d = generated();
  TestServer server({.cert = d + "cn-only.crt", .key = d + "cn-only.key"}, echo);
  Config c = test_config(server.url("localhost"));
  c.ca_data = read_file(d + "gen-ca.crt");
  const HttpResponse resp = connect(c)->perform(get(server.url("localhost") + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error, HasSubstr("is not valid for the name localhost (it lists none)"));
}

TEST(KubeTls, ClientCertificateMissingOrRefusedIsNamed) {
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    SCOPED_TRACE(version == TLS1_2_VERSION ? "TLS 1.2" : "TLS 1.3");
    TestServer server({.require_client_cert = true, .min_version = version, .max_version = version}, echo);
    const HttpResponse none = connect(test_config(server.url()))->perform(get(server.url() + "/"));
    EXPECT_EQ(none.status, 0);
    EXPECT_THAT(
        none.transport_error,
        HasSubstr("the API server at 127.0.0.1 requires a client certificate, and the kubeconfig gives "
                  "none"));

    // A certificate from a CA the server does not trust for clients.
    Config stranger = test_config(server.url());
    stranger.client_cert_file = generated() + "stranger.crt";
    stranger.client_key_file = generated() + "stranger.key";
    const HttpResponse refused = connect(stranger)->perform(get(server.url() + "/"));
    EXPECT_EQ(refused.status, 0);
    EXPECT_THAT(refused.transport_error,
                HasSubstr("the API server at 127.0.0.1 refused this client's certificate"));
  }
}

TEST(KubeTls, MismatchedClientKeyIsASetupError) {
  Config c = test_config("https://127.0.0.1:1");
  c.client_cert_file = kFixtures + "client.crt";
  c.client_key_file = kFixtures + "server.key";
  auto conn = HttpConnection::create(c, "http-test");
  ASSERT_FALSE(conn.ok());
  EXPECT_THAT(conn.error().message,
              HasSubstr("cannot use client-key " + kFixtures + "server.key: key values mismatch"));
}

TEST(KubeTls, Tls12SessionsAreResumedToo) {
  TestServer server({.resume_sessions = true, .max_version = TLS1_2_VERSION}, echo);
  auto shared = HttpConnection::tls_settings(test_config(server.url()));
  ASSERT_TRUE(shared) << shared.error().message;
  for (int i = 0; i < 2; ++i) {
    auto conn = HttpConnection::create("test", *shared);
    ASSERT_TRUE(conn) << conn.error().message;
    EXPECT_EQ((*conn)->perform(get(server.url() + "/")).status, 200);
  }
  EXPECT_EQ(server.handshakes(), 2);
  EXPECT_EQ(server.resumed(), 1);
}

TEST(KubeHttp, IpAddressSanIsVerified) {
  TestServer v4({}, echo);
  EXPECT_EQ(connect(test_config(v4.url()))->perform(get(v4.url() + "/")).status, 200);

  // 127.0.0.2 is a loopback address too, but not in the certificate.
  TestServer other({.bind = "127.0.0.2"}, echo);
  const HttpResponse resp =
      connect(test_config(other.url("127.0.0.2")))->perform(get(other.url("127.0.0.2") + "/"));
  EXPECT_EQ(resp.status, 0);
  EXPECT_THAT(resp.transport_error,
              HasSubstr("the certificate of the API server at 127.0.0.2 is not valid for the IP "
                        "address 127.0.0.2 (it lists IP:127.0.0.1, IP:::1, DNS:localhost, "
                        "DNS:apiserver.test)"));
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
  EXPECT_THAT(resp.transport_error, HasSubstr("is not valid for the name wrong.test"));
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

TEST(KubeHttpParse, AWholeHeadFromABuffer) {
  ResponseHead head;
  const std::string text =
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
  auto taken = parse_response_head(text, head);
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(*taken, text.size() - 2);
  EXPECT_EQ(head.status, 429);
  EXPECT_EQ(head.retry_after, "3");
  EXPECT_EQ(head.content_length, 2U);
  EXPECT_FALSE(head.keep_alive);

  auto partial = parse_response_head("HTTP/1.1 200 OK\r\nContent-Le", head);
  ASSERT_TRUE(partial);
  EXPECT_EQ(*partial, std::nullopt);

  ASSERT_TRUE(
      parse_response_head("HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\nContent-Length: 9\n\n", head));
  EXPECT_TRUE(head.chunked);
  EXPECT_EQ(head.content_length, std::nullopt);
  EXPECT_FALSE(head.keep_alive) << "both framings: the connection is not reused";

  EXPECT_EQ(*parse_chunk_size("1a;name=value"), 26U);
  EXPECT_FALSE(parse_chunk_size(""));
  EXPECT_FALSE(parse_chunk_size("-1"));
  EXPECT_FALSE(parse_chunk_size("ffffffffffffffffff"));
}

TEST(KubeHttpParse, AStatusOutsideTheFiveClassesIsNoResponse) {
  ResponseHead head;
  for (const char* line : {"HTTP/1.1 004 Not", "HTTP/1.1 099", "HTTP/1.1 600 X", "HTTP/1.1 999"}) {
    SCOPED_TRACE(line);
    const Status st = parse_status_line(line, head);
    ASSERT_FALSE(st);
    EXPECT_THAT(st.error().message, HasSubstr("not an HTTP/1.x response"));
  }
  ASSERT_TRUE(parse_status_line("HTTP/1.1 100 Continue", head));
  EXPECT_EQ(head.status, 100);
  ASSERT_TRUE(parse_status_line("HTTP/1.0 599", head));
  EXPECT_EQ(head.status, 599);
}

TEST(KubeHttpParse, ChunkedBodyInPiecesOfAnySize) {
  const std::string body = "6;ext=1\r\nline1\n\r\n3\r\nabc\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (const size_t step : {size_t{1}, size_t{2}, size_t{7}, body.size()}) {
    SCOPED_TRACE(step);
    ChunkedDecoder decoder;
    std::string data;
    size_t pos = 0;
    while (!decoder.done() && pos < body.size()) {
      auto taken = decoder.feed(std::string_view(body).substr(pos, step), [&](std::string_view piece) {
        data.append(piece);
        return true;
      });
      ASSERT_TRUE(taken) << taken.error().message;
      pos += *taken;
    }
    EXPECT_TRUE(decoder.done());
    EXPECT_EQ(data, "line1\nabc");
    EXPECT_EQ(body.substr(pos), "NEXT") << "what follows the body is left alone";
  }
  ChunkedDecoder bad;
  const auto no_sink = [](std::string_view) { return true; };
  EXPECT_THAT(bad.feed("3\r\nabcX\r\n", no_sink).error().message, HasSubstr("bad chunk end"));
  ChunkedDecoder stops;
  auto taken = stops.feed("3\r\nabc\r\n0\r\n\r\n", [](std::string_view) { return false; });
  ASSERT_TRUE(taken);
  EXPECT_TRUE(stops.stopped());
  EXPECT_EQ(*taken, 6U);
}

TEST(KubeProxy, WhichHostsUseTheProxy) {
  const ProxyEnv env{"http://proxy.corp:3128",
                     "example.com, .internal,10.0.0.0/8,192.168.1.5,svc:8443,[fd00::1],*.wild.example.org"};
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
  EXPECT_FALSE(via("x.wild.example.org"));  // "*.wild.example.org": subdomains only, as ".wild.example.org"
  EXPECT_TRUE(via("wild.example.org"));
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
