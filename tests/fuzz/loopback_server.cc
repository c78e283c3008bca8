#include "loopback_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>

#include "fuzz_support.h"

namespace dm::fuzz {
namespace {

// Waits up to `ms` for `fd` to become readable.
bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace

LoopbackServer::LoopbackServer() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  if (listen_fd_ < 0 || ::bind(listen_fd_, sa, len) != 0 || ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, sa, &len) != 0) {
    fail("cannot listen on a loopback port");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

LoopbackServer::~LoopbackServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

void LoopbackServer::respond(std::string_view response) {
  const std::lock_guard lock(mu_);
  response_ = response;
}

std::string LoopbackServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/nodes";
}

kube::HttpResponse LoopbackServer::perform(kube::HttpRequest request, std::string* streamed) {
  request.url = url();
  if (streamed != nullptr) {
    request.on_body = [streamed](std::string_view piece) {
      streamed->append(piece);
      return true;
    };
  }
  request.timeout = std::chrono::seconds(10);  // never reached: the server always closes
  auto conn = kube::HttpConnection::create(kube::Config{.server = "http://127.0.0.1"}, "dm-fuzz");
  if (!conn) fail(conn.error().message);
  return (*conn)->perform(request);
}

void LoopbackServer::run() {
  while (!stop_) {
    if (!readable(listen_fd_, 20)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    ::close(fd);
  }
}

void LoopbackServer::serve(int fd) {
  // The request head, then the response, then the client's close (it may stop reading early).
  std::string request;
  std::array<char, 4096> buf{};
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (!readable(fd, 5000)) return;
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) return;
    request.append(buf.data(), static_cast<size_t>(n));
  }
  std::string response;
  {
    const std::lock_guard lock(mu_);
    response = response_;
  }
  std::string_view rest = response;
  while (!rest.empty()) {
    const ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    rest.remove_prefix(static_cast<size_t>(n));
  }
  ::shutdown(fd, SHUT_WR);
  while (readable(fd, 5000) && ::recv(fd, buf.data(), buf.size(), 0) > 0) {
  }
}

LoopbackServer& loopback_server() {
  static LoopbackServer server;
  return server;
}

}  // namespace dm::fuzz
