#include "support/stand_in_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "support/process.h"

namespace dm::test {

namespace {

constexpr int kTickMs = 20;  // how often a waiting thread looks at the stop flag

int listen_loopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("stand-in socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0 ||  // NOLINT
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {                         // NOLINT
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("stand-in listen: ") + std::strerror(e));
  }
  port = ntohs(a.sin_port);
  return fd;
}

// A connection accepted within one tick, or -1.
int accept_within_tick(int listen_fd) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, kTickMs) <= 0) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
}

// Reads more of the connection into `buf`: false when the client closed it (or `stop` was set).
bool read_more(int fd, std::string& buf, const std::atomic<bool>& stop) {
  std::array<char, 4096> chunk{};
  while (!stop) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, kTickMs);
    if (n < 0 && errno != EINTR) return false;
    if (n <= 0) continue;
    const ssize_t r = ::recv(fd, chunk.data(), chunk.size(), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf.append(chunk.data(), static_cast<size_t>(r));
    return true;
  }
  return false;
}

// One request (its head and a Content-Length body) from `buf`, reading more as needed.
bool read_request(int fd, std::string& buf, StandInServer::Request& req, const std::atomic<bool>& stop) {
  size_t end = 0;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (!read_more(fd, buf, stop)) return false;
  }
  const std::string head = buf.substr(0, end);
  buf.erase(0, end + 4);
  const std::string line = head.substr(0, head.find("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 + 1);
  req.method = line.substr(0, sp1);
  req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t length = 0;
  if (const size_t p = head.find("Content-Length: "); p != std::string::npos)
    length = std::stoul(head.substr(p + 16));
  while (buf.size() < length) {
    if (!read_more(fd, buf, stop)) return false;
  }
  req.body = buf.substr(0, length);
  buf.erase(0, length);
  return true;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

StandInServer::StandInServer(Route route) : route_(std::move(route)) {
  listen_fd_ = listen_loopback(port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

StandInServer::~StandInServer() {
  stop_ = true;
  acceptor_.join();
  std::vector<std::thread> connections;
  {
    const std::lock_guard lock(mu_);
    connections.swap(connections_);
  }
  for (auto& t : connections) t.join();
  ::close(listen_fd_);
}

std::string StandInServer::status_body(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")" + message +
         R"(","reason":")" + reason + R"(","code":)" + std::to_string(code) + "}";
}

std::vector<std::string> StandInServer::requests() const {
  const std::lock_guard lock(mu_);
  return requests_;
}

bool StandInServer::received(const std::string& part) const {
  const std::lock_guard lock(mu_);
  for (const auto& r : requests_) {
    if (r.find(part) != std::string::npos) return true;
  }
  return false;
}

void StandInServer::accept_loop() {
  while (!stop_) {
    const int fd = accept_within_tick(listen_fd_);
    if (fd < 0) continue;
    const std::lock_guard lock(mu_);
    connections_.emplace_back([this, fd] { serve(fd); });
  }
}

void StandInServer::hold(int fd) {
  ++held_now_;
  std::string ignored;
  while (read_more(fd, ignored, stop_)) ignored.clear();  // until the client closes (or the server stops)
  --held_now_;
}

void StandInServer::serve(int fd) {
  std::string buf;
  Request req;
  while (!stop_ && read_request(fd, buf, req, stop_)) {
    {
      const std::lock_guard lock(mu_);
      requests_.push_back(req.method + " " + req.target);
    }
    const std::optional<Answer> answer = silent_ ? std::nullopt : route_(req);
    if (!answer) {
      hold(fd);
      break;
    }
    const auto until = std::chrono::steady_clock::now() + answer->delay;
    while (!stop_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(kTickMs));
    if (silent_) {  // the link went silent while the answer was due
      hold(fd);
      break;
    }
    const std::string out = "HTTP/1.1 " + std::to_string(answer->status) +
                            " Stand-in\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(answer->body.size()) + "\r\n\r\n" + answer->body;
    if (!send_all(fd, out)) break;
  }
  ::close(fd);
}

SilentListener::SilentListener() {
  listen_fd_ = listen_loopback(port_);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      const int fd = accept_within_tick(listen_fd_);
      if (fd < 0) continue;
      fds_.push_back(fd);  // kept open, never read
      ++accepted_;
    }
  });
}

SilentListener::~SilentListener() {
  stop_ = true;
  acceptor_.join();
  for (const int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

std::string write_kubeconfig(const std::string& dir, const std::string& server_url) {
  std::string path = dir + "/kubeconfig";
  write_file(path,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server_url +
                 "\nusers:\n- name: u\n  user:\n    token: stand-in\ncontexts:\n- name: ctx\n  context:\n"
                 "    cluster: c\n    user: u\ncurrent-context: ctx\n");
  return path;
}

}  // namespace dm::test
