#include "canned_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>

#include "fuzz_support.h"

namespace dm::fuzz {

bool CannedServer::respond(std::string_view response) {
  if (response.size() > kMaxResponse) return false;
  response_ = response;
  return true;
}

Result<int> CannedServer::dial() {
  std::array<int, 2> fds{};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()) != 0) fail("socketpair");
  // Room for the whole answer (and the request, which nobody reads) before the client reads a byte.
  const int room = 4 * static_cast<int>(kMaxResponse);
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
  ::setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &room, sizeof room);
  std::string_view rest = response_;
  while (!rest.empty()) {
    const ssize_t n = ::send(fds[1], rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) fail("the answer does not fit the socket pair's buffer");
    rest.remove_prefix(static_cast<size_t>(n));
  }
  ::shutdown(fds[1], SHUT_WR);
  peers_.push_back(fds[1]);  // open until the request is over: the client's request must not hit a closed end
  return fds[0];
}

kube::HttpResponse CannedServer::perform(kube::HttpRequest request, std::string* streamed) {
  request.url = "http://127.0.0.1:8080/api/v1/nodes";
  if (streamed != nullptr) {
    request.on_body = [streamed](std::string_view piece) {
      streamed->append(piece);
      return true;
    };
  }
  request.timeout = std::chrono::seconds(10);  // never reached: every answer ends with the pair's shutdown
  auto conn = kube::HttpConnection::create(kube::Config{.server = "http://127.0.0.1"}, "dm-fuzz");
  if (!conn) fail(conn.error().message);
  (*conn)->set_dialer([this](const std::string&, const std::string&) { return dial(); });
  kube::HttpResponse resp = (*conn)->perform(request);
  conn->reset();
  for (const int fd : peers_) ::close(fd);
  peers_.clear();
  return resp;
}

CannedServer& canned_server() {
  static CannedServer server;
  return server;
}

}  // namespace dm::fuzz
