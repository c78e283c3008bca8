// A 403 right after an API server outage (the restarted server's authorizer has not loaded the RBAC rules
// yet) is retried only by the request that met the outage, within OutageWindow::kAfter of it: the window
// alone, and the client against a scripted plain-HTTP server on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/retry.h"
#include "support/doubles.h"

namespace dm::kube {
namespace {

using namespace std::chrono_literals;

TEST(OutageWindowTest, A403IsTheRestartOnlyWithinTheWindowAfterMeetingTheOutage) {
  const TimePoint t0{std::chrono::hours(1)};
  OutageWindow w;
  EXPECT_FALSE(w.forbidden_is_restart(t0)) << "a request that never met the outage takes 403 as the answer";
  w.unreachable(t0);
  EXPECT_TRUE(w.forbidden_is_restart(t0 + 1s));
  EXPECT_TRUE(w.forbidden_is_restart(t0 + OutageWindow::kAfter - 1ms));
  EXPECT_FALSE(w.forbidden_is_restart(t0 + OutageWindow::kAfter));
  w.unreachable(t0 + 40s);  // met it again: the window starts over
  EXPECT_TRUE(w.forbidden_is_restart(t0 + 60s));
}

// Answers each request with the next scripted reply: a status code, or 0 to read the request and close the
// connection without an answer (the server went away). One request per connection.
class ScriptedServer {
 public:
  ScriptedServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);  // NOLINT
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);  // NOLINT
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  void script(std::vector<int> replies) {
    const std::lock_guard l(mu_);
    replies_.assign(replies.begin(), replies.end());
  }
  [[nodiscard]] int requests() const { return requests_.load(); }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      int reply = 500;
      {
        const std::lock_guard l(mu_);
        if (!replies_.empty()) {
          reply = replies_.front();
          replies_.pop_front();
        }
      }
      ++requests_;
      if (reply != 0) {
        const std::string body = reply == 200
                                     ? "{}"
                                     : R"({"kind":"Status","status":"Failure","message":"forbidden",)"
                                       R"("reason":"Forbidden","code":)" +
                                           std::to_string(reply) + "}";
        const std::string out =
            "HTTP/1.1 " + std::to_string(reply) +
            " X\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        (void)::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::deque<int> replies_;
  std::thread thread_;
};

std::unique_ptr<Client> client_for(const ScriptedServer& server, const Clock& clock) {
  Config config;
  config.server = server.url();
  config.token = "t";
  ClientOptions o;
  o.clock = &clock;
  o.retry_base = 1ms;
  o.retry_max = 2ms;
  o.request_timeout = 5000ms;
  auto c = Client::create(config, o);
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

TEST(OutageWindowTest, OnlyTheRequestThatMetTheOutageRetriesA403) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock);

  // The server goes away under this read, comes back forbidding (RBAC not loaded), then answers.
  server.script({0, 403, 200});
  auto met = client->get("/api/v1/nodes/a");
  EXPECT_TRUE(met) << met.error().message;
  EXPECT_EQ(server.requests(), 3);

  // Right after (the fake clock has moved milliseconds), a request that never met the outage: its 403 is
  // the answer, sent once.
  server.script({403, 200});
  auto fresh = client->get("/api/v1/nodes/b");
  ASSERT_FALSE(fresh);
  EXPECT_TRUE(fresh.error().forbidden()) << fresh.error().message;
  EXPECT_EQ(server.requests(), 4);
}

TEST(OutageWindowTest, A403LongAfterTheRequestMetTheOutageIsTheAnswer) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock);
  clock.on_sleep = [&clock](int) { clock.advance(OutageWindow::kAfter); };  // each backoff outlasts it
  server.script({0, 403, 200});
  auto r = client->get("/api/v1/nodes/a");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().forbidden()) << r.error().message;
  EXPECT_EQ(server.requests(), 2);
}

}  // namespace
}  // namespace dm::kube
