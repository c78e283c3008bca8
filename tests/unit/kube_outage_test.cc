// An API server outage as a request meets it, against a scripted plain-HTTP server on loopback and the fake
// clock: a request the server does not answer is tried again until the deadline of what it serves (a
// write only when that cannot repeat it), and a 403 right after the outage (the restarted server's
// authorizer has not loaded the RBAC rules yet) is retried only by the request that met the outage, within
// OutageWindow::kAfter of it.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/outage_log.h"
#include "kube/retry.h"
#include "manager/node/node_ops.h"
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

// One scripted answer: a status code, or 0 to read the request and close the connection without an answer
// (the server went away); a 429 carries `retry_after` as its Retry-After header ("" = none).
struct Reply {
  int status = 200;
  std::string retry_after = "7";
  std::chrono::milliseconds delay{0};  // before the answer (the server busy with the request)
};

// Answers each request with the next scripted reply. One request per connection.
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

  void script(const std::vector<int>& replies) {
    std::vector<Reply> r;
    r.reserve(replies.size());
    for (int status : replies) r.push_back({.status = status});
    script(r);
  }
  void script(const std::vector<Reply>& replies) {
    const std::lock_guard l(mu_);
    replies_.assign(replies.begin(), replies.end());
  }
  // "<METHOD> <path>" of each request, in order.
  [[nodiscard]] std::vector<std::string> lines() const {
    const std::lock_guard l(mu_);
    return lines_;
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
      Reply next{.status = 500};
      {
        const std::lock_guard l(mu_);
        if (!replies_.empty()) {
          next = replies_.front();
          replies_.pop_front();
        }
        const auto line_end = in.find(" HTTP/");
        lines_.push_back(in.substr(0, line_end == std::string::npos ? 0 : line_end));
      }
      const int reply = next.status;
      ++requests_;
      std::this_thread::sleep_for(next.delay);
      if (reply != 0) {
        const std::string body = reply == 200
                                     ? "{}"
                                     : std::string(reply == 429 ? R"({"kind":"Status","status":"Failure",)"
                                                                  R"("message":"too many requests, please )"
                                                                  R"(try again later",)"
                                                                  R"("reason":"TooManyRequests","code":)"
                                                                : R"({"kind":"Status","status":"Failure",)"
                                                                  R"("message":"forbidden",)"
                                                                  R"("reason":"Forbidden","code":)") +
                                           std::to_string(reply) + "}";
        const std::string out =
            "HTTP/1.1 " + std::to_string(reply) + " X\r\n" +
            (reply == 429 && !next.retry_after.empty() ? "Retry-After: " + next.retry_after + "\r\n" : "") +
            "Content-Type: application/json\r\nConnection: close\r\nContent-Length: " +
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
  mutable std::mutex mu_;
  std::deque<Reply> replies_;
  std::vector<std::string> lines_;
  std::thread thread_;
};

// A client with the backoff of the program (200 ms doubling up to 10 s), or a fast one (1-2 ms).
enum class Backoff { kFast, kReal };

std::unique_ptr<Client> client_for(const ScriptedServer& server, const Clock* clock,
                                   Backoff backoff = Backoff::kFast,
                                   const std::function<void(ClientOptions&)>& adjust = nullptr) {
  Config config;
  config.server = server.url();
  config.token = "t";
  ClientOptions o;
  o.clock = clock;
  if (backoff == Backoff::kFast) {
    o.retry_base = 1ms;
    o.retry_max = 2ms;
  }
  o.request_timeout = 5000ms;
  if (adjust) adjust(o);
  auto c = Client::create(config, o);
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

std::unique_ptr<Client> client_for(const ScriptedServer& server, const Clock& clock,
                                   Backoff backoff = Backoff::kFast) {
  return client_for(server, &clock, backoff);
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

std::vector<int> times(int n, int reply) {
  return std::vector<int>(static_cast<size_t>(n), reply);
}

TEST(RetryUntilDeadlineTest, AReadRidesOutAnOutageLongerThanAnyCountOfAttemptsUsedToAllow) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock, Backoff::kReal);
  auto replies = times(30, 0);  // 30 attempts: the backoff, capped at 10 s (5 s at the least), over 2 minutes
  replies.push_back(200);
  server.script(replies);
  const TimePoint start = clock.now();
  auto r = client->get("/api/v1/nodes/a");
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ(server.requests(), 31);
  EXPECT_GT(clock.now() - start, 90s);
  EXPECT_LE(clock.now() - start, ClientOptions().retry_for) << "within the budget of a request without one";
}

// A 503 or a 429 (an overload bounds the retries of a step with a deadline like any other unanswered
// attempt): the step fails at its deadline, and is restored.
TEST(RetryUntilDeadlineTest, TheThreadsDeadlineEndsTheRetriesExactlyThere) {
  for (const int status : {503, 429}) {
    SCOPED_TRACE(status);
    ScriptedServer server;
    test::FakeClock clock;
    auto client = client_for(server, clock, Backoff::kReal);
    server.script(times(1000, status));
    const TimePoint start = clock.now();
    Result<nlohmann::json> r = Error("not sent");
    {
      const RequestDeadline step(Deadline::after(clock, 60s));
      r = client->get("/api/v1/nodes/a");
    }
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().unanswered) << r.error().message;
    EXPECT_EQ(r.error().http_status, status);
    EXPECT_EQ(clock.now() - start, 60s) << "the last attempt goes out at the deadline, none after it";
    EXPECT_THAT(r.error().message, ::testing::HasSubstr("not answered for 1m0s: gave up at the deadline"));
    EXPECT_TRUE(RequestDeadline::current().unlimited()) << "the scope ends with its object";
  }
}

TEST(RetryUntilDeadlineTest, WithoutADeadlineTheClientsBudgetApplies) {
  ScriptedServer server;
  test::FakeClock clock;
  Config config;
  config.server = server.url();
  ClientOptions o;
  o.clock = &clock;
  o.retry_for = 45s;
  auto client = Client::create(config, o);
  ASSERT_TRUE(client) << client.error().message;
  server.script(times(1000, 0));
  const TimePoint start = clock.now();
  auto r = (*client)->get("/api/v1/nodes/a");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().unanswered);
  EXPECT_EQ(clock.now() - start, 45s);

  o.retry_for = 0ms;  // never again: one attempt
  auto once = Client::create(config, o);
  ASSERT_TRUE(once) << once.error().message;
  server.script(times(10, 0));
  const int before = server.requests();
  auto r0 = (*once)->get("/api/v1/nodes/a");
  ASSERT_FALSE(r0);
  EXPECT_FALSE(r0.error().unanswered);
  EXPECT_EQ(server.requests() - before, 1);
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(RetryUntilDeadlineTest, A429IsMetWithItsRetryAfterUntilTheServerTakesTheRequest) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock, Backoff::kReal);
  auto replies = times(10, 429);  // 70 s of "too many requests": more than any count used to allow
  replies.push_back(200);
  server.script(replies);
  const TimePoint start = clock.now();
  const test::LogCapture log;
  // A create with a generated name: a write a second attempt could repeat, but a 429 says it did not happen.
  auto r = client->create("/api/v1/namespaces/a/events",
                          {{"kind", "Event"}, {"metadata", {{"generateName", "e-"}}}});
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ(server.requests(), 11);
  EXPECT_EQ(clock.now() - start, 70s) << "each wait is the server's Retry-After";
  // An overloaded server is said to be one: nobody should go looking for a dead API server.
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text,
                        "warning The API server is overloaded and turning requests away: POST "
                        "/api/v1/namespaces/a/events: "),
            1U)
      << text;
  EXPECT_EQ(occurrences(text, "not answer"), 0U) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("The API server has turned requests away for "));
  EXPECT_EQ(occurrences(text, "info The API server is taking requests again after 1m10s"), 1U) << text;
}

// The first node write of a run serves no deadline of its own. An overloaded server (API Priority and
// Fairness) that turns it away for longer than the client's budget does not end the run: the server did not
// look at the request, and giving up would only bring it back with the run's restart.
TEST(RetryUntilDeadlineTest, WithoutADeadlineA429StormLongerThanTheBudgetIsRiddenOut) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, &clock, Backoff::kReal, [](ClientOptions& o) { o.retry_for = 45s; });
  auto replies = times(20, 429);  // 20 x Retry-After 7 s = 140 s turned away, three times the budget
  replies.push_back(200);
  server.script(replies);
  const TimePoint start = clock.now();
  const test::LogCapture log;
  auto r = client->patch("/api/v1/nodes/a", PatchType::kMerge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ(server.requests(), 21);
  EXPECT_EQ(clock.now() - start, 140s);
  const std::string text = log.text();
  EXPECT_THAT(text, ::testing::HasSubstr("The API server is overloaded and turning requests away: PATCH "
                                         "/api/v1/nodes/a: "));
  EXPECT_EQ(occurrences(text, "trying again for up to"), 0U) << "no limit is announced: " << text;
  EXPECT_THAT(text, ::testing::HasSubstr("The API server is taking requests again after 2m20s"));
}

// Time turned away is not counted, time not answered is: a server that turns requests away and then stops
// answering is given up on once it has not answered for the budget.
TEST(RetryUntilDeadlineTest, WithoutADeadlineOnlyTimeNotAnsweredCountsAgainstTheBudget) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, &clock, Backoff::kReal, [](ClientOptions& o) { o.retry_for = 45s; });
  auto replies = times(10, 429);  // 70 s turned away
  for (int i = 0; i < 1000; ++i) replies.push_back(0);
  server.script(replies);
  const TimePoint start = clock.now();
  auto r = client->get("/api/v1/nodes/a");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().unanswered) << r.error().message;
  EXPECT_EQ(clock.now() - start, 70s + 45s);
  EXPECT_THAT(r.error().message, ::testing::HasSubstr("not answered for 1m55s: gave up at the deadline"));
}

// A signal that lands on a write: the write already sent is let finish, so that its answer says whether it
// was applied (a caller told "cancelled" could not know, and the server may apply it after the caller's next
// look); a read stops at once; a write whose answer does not come within the settle time is given up as
// cancelled, and never sent again.
std::unique_ptr<Client> cancellable_client(const ScriptedServer& server, const CancelToken& cancel,
                                           std::chrono::milliseconds settle) {
  return client_for(server, nullptr, Backoff::kFast, [&](ClientOptions& o) {
    o.cancel = cancel;
    o.write_settle = settle;
  });
}

// Fires `cancel` once the server has read `n` requests.
std::thread cancel_when_read(const ScriptedServer& server, const CancelToken& cancel, int n) {
  return std::thread([&server, cancel, n] {
    while (server.requests() < n) std::this_thread::sleep_for(1ms);
    cancel.cancel();
  });
}

TEST(CancelledRequestTest, AWriteUnderWayWhenTheSignalLandsIsLetFinishAndItsAnswerCounts) {
  ScriptedServer server;
  const CancelToken cancel;
  auto client = cancellable_client(server, cancel, 2000ms);
  server.script({Reply{.status = 200, .delay = 300ms}});
  auto canceller = cancel_when_read(server, cancel, 1);
  auto r = client->create("/api/v1/namespaces/a/events", nlohmann::json{{"kind", "Event"}});
  canceller.join();
  ASSERT_TRUE(cancel.cancelled());
  EXPECT_TRUE(r) << "the write's answer, not an abort: " << r.error().message;
  EXPECT_EQ(server.requests(), 1);
}

TEST(CancelledRequestTest, AReadUnderWayWhenTheSignalLandsStopsAtOnce) {
  ScriptedServer server;
  const CancelToken cancel;
  auto client = cancellable_client(server, cancel, 2000ms);
  server.script({Reply{.status = 200, .delay = 300ms}});
  auto canceller = cancel_when_read(server, cancel, 1);
  auto r = client->get("/api/v1/nodes/n");
  canceller.join();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().cancelled()) << r.error().message;
}

TEST(CancelledRequestTest, AWriteNotAnsweredWithinTheSettleTimeIsGivenUpAndNotSentAgain) {
  ScriptedServer server;
  const CancelToken cancel;
  auto client = cancellable_client(server, cancel, 50ms);
  server.script({Reply{.status = 200, .delay = 1000ms}, Reply{.status = 200}});
  auto canceller = cancel_when_read(server, cancel, 1);
  auto r = client->create("/api/v1/namespaces/a/events", nlohmann::json{{"kind", "Event"}});
  canceller.join();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().cancelled()) << r.error().message;
  EXPECT_EQ(server.requests(), 1);
}

// The end of an outage is kept: what decides from the controllers' caches gives them time to catch up.
TEST(RetryUntilDeadlineTest, TheClientTellsWhenTheLastOutageItMetEnded) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock);
  server.script(std::vector<int>{200});
  ASSERT_TRUE(client->get("/api/v1/nodes/n"));
  EXPECT_FALSE(client->outage_ended_at().has_value()) << "no outage met";
  server.script({503, 0, 200});
  const RequestDeadline step(Deadline::after(clock, std::chrono::minutes(1)));
  ASSERT_TRUE(client->get("/api/v1/nodes/n"));
  ASSERT_TRUE(client->outage_ended_at().has_value());
  EXPECT_EQ(*client->outage_ended_at(), clock.now());
}

TEST(RetryUntilDeadlineTest, AWriteThatMayHaveArrivedIsNotSentAgainWhateverTheDeadline) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock, Backoff::kReal);
  const RequestDeadline step(Deadline::after(clock, std::chrono::minutes(10)));
  const nlohmann::json event = {{"kind", "Event"}, {"metadata", {{"generateName", "e-"}}}};
  server.script({500, 200});
  auto r = client->create("/api/v1/namespaces/a/events", event);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 500);
  EXPECT_EQ(server.requests(), 1);
  server.script({0, 200});  // the request was read, then the connection dropped: it may have arrived
  auto dropped = client->create("/api/v1/namespaces/a/events", event);
  ASSERT_FALSE(dropped);
  EXPECT_EQ(server.requests(), 2);
  EXPECT_FALSE(dropped.error().unanswered) << "given up at once, not at the deadline";
}

// API Priority and Fairness turns a request away with 429 before looking at it: a read or a write is sent
// again after the server's Retry-After (between the backoff's base and its 10 s cap), or with the backoff
// when it names none, until the server takes it. A write that a second attempt could repeat by accident (a
// patch without resourceVersion) is sent again all the same: the server did not process the first one.
TEST(TooManyRequestsTest, ReadsAndWritesWaitAsTheServerSaysAndGoThrough) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock, Backoff::kReal);

  server.script(std::vector<Reply>{{429, "2"}, {429, "2"}, {429, "2"}, {200}});
  TimePoint start = clock.now();
  auto read = client->get("/api/v1/nodes/a");
  EXPECT_TRUE(read) << read.error().message;
  EXPECT_EQ(clock.now() - start, 6s);

  server.script(std::vector<Reply>{{429, ""}, {429, ""}, {429, ""}, {429, ""}, {200}});
  start = clock.now();
  const nlohmann::json labels = {{"metadata", {{"labels", {{"a", "b"}}}}}};
  auto write = client->patch("/api/v1/nodes/a", PatchType::kStrategicMerge, labels);
  EXPECT_TRUE(write) << write.error().message;
  // 200, 400, 800 and 1600 ms, each with its jitter (50 to 100 %).
  EXPECT_GE(clock.now() - start, 1500ms);
  EXPECT_LE(clock.now() - start, 3000ms);

  server.script(std::vector<Reply>{{429, "60"}, {429, "60"}, {200}});
  start = clock.now();
  EXPECT_TRUE(client->get("/api/v1/nodes/a"));
  EXPECT_EQ(clock.now() - start, 20s) << "a Retry-After beyond the cap waits the cap";

  server.script(std::vector<Reply>{{429, "0"}, {429, "0"}, {429, "0"}, {200}});
  start = clock.now();
  EXPECT_TRUE(client->get("/api/v1/nodes/a"));
  EXPECT_EQ(clock.now() - start, 600ms) << "a Retry-After of 0 waits the backoff's base";
  EXPECT_EQ(server.requests(), 16);
}

// The run's node writes meet the same burst through the client: the first write's GET and PATCH are turned
// away a few times each and the write goes through, without a retry of the write's own ("Failed to update
// ..., retrying" is for answers that are not an overload) and with the PATCH applied once.
TEST(TooManyRequestsTest, ANodeWriteRidesOutABurstOf429s) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock, Backoff::kReal);
  const test::LogCapture log;
  manager::NodeOps node(*client, clock, CancelToken(), "a");
  server.script(std::vector<Reply>{{429, "1"}, {429, "1"}, {200}, {429, ""}, {429, "3"}, {429, ""}, {200}});
  const manager::NodeFold pause = [](const nlohmann::json&, manager::FoldedPatch& part) {
    part.body["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "paused-for-driver-upgrade";
  };

  const Status s = node.write_folded({pause}, "labels and lease");

  EXPECT_TRUE(s) << s.error().message;
  EXPECT_THAT(server.lines(),
              ::testing::ElementsAre("GET /api/v1/nodes/a", "GET /api/v1/nodes/a", "GET /api/v1/nodes/a",
                                     "PATCH /api/v1/nodes/a", "PATCH /api/v1/nodes/a",
                                     "PATCH /api/v1/nodes/a", "PATCH /api/v1/nodes/a"));
  EXPECT_THAT(log.text(), ::testing::Not(::testing::HasSubstr("Failed to update")));
}

TEST(OutageLogTest, OneLineWhenItBeginsOneEvery15sWhileItLastsOneWhenItEnds) {
  const test::LogCapture log;
  OutageLog outage;
  const TimePoint t0{std::chrono::hours(1)};
  for (auto t = 0s; t <= 50s; t += 1s) outage.unanswered(t0 + t, "GET /x: refused", 300s - t);  // 51 attempts
  outage.answered(t0 + 52s);
  outage.answered(t0 + 53s);  // no outage under way: nothing to say
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text, "\n"), 5U) << text;
  EXPECT_EQ(
      occurrences(text,
                  "warning The API server is not answering: GET /x: refused; trying again for up to 5m0s"),
      1U)
      << text;
  EXPECT_EQ(occurrences(text, "warning The API server has not answered for "), 3U) << text;
  EXPECT_THAT(
      text, ::testing::HasSubstr("has not answered for 15s: GET /x: refused; trying again for up to 4m45s"));
  EXPECT_THAT(
      text, ::testing::HasSubstr("has not answered for 30s: GET /x: refused; trying again for up to 4m30s"));
  EXPECT_THAT(
      text, ::testing::HasSubstr("has not answered for 45s: GET /x: refused; trying again for up to 4m15s"));
  EXPECT_EQ(occurrences(text, "info The API server is answering again after 52s"), 1U) << text;
}

TEST(OutageLogTest, TooManyRequestsIsAnOverloadNotAnOutage) {
  const test::LogCapture log;
  OutageLog outage;
  const TimePoint t0{std::chrono::hours(1)};
  for (auto t = 0s; t <= 20s; t += 1s)
    outage.unanswered(t0 + t, "GET /x: 429", 60s - t, Unanswered::kTooManyRequests);
  outage.answered(t0 + 21s);
  outage.unanswered(t0 + 30s, "GET /x: refused", std::nullopt);  // a real outage later: said as one
  outage.answered(t0 + 31s);
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text, "\n"), 5U) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("warning The API server is overloaded and turning requests away: "
                                         "GET /x: 429; trying again for up to 1m0s\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("warning The API server has turned requests away for 15s: GET /x: "
                                         "429; trying again for up to 45s\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("info The API server is taking requests again after 21s\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("warning The API server is not answering: GET /x: refused; trying "
                                         "again\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("info The API server is answering again after 1s\n"));
}

TEST(OutageLogTest, AnOutageAfterTheLastOneEndedBeginsAfresh) {
  const test::LogCapture log;
  OutageLog outage;
  const TimePoint t0{std::chrono::hours(1)};
  outage.unanswered(t0, "GET /x: refused", std::nullopt);
  outage.answered(t0 + 1s);
  outage.unanswered(t0 + 2s, "GET /y: 503", std::nullopt);
  outage.unanswered(t0 + 3s, "GET /y: 503", std::nullopt);
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text, "The API server is not answering: "), 2U) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("not answering: GET /y: 503; trying again\n"));
  EXPECT_EQ(occurrences(text, "has not answered for"), 0U) << text;
}

TEST(RetryUntilDeadlineTest, ARequestThroughAnOutageLogsItsBeginningCadenceAndEndNotEachAttempt) {
  ScriptedServer server;
  test::FakeClock clock;
  auto client = client_for(server, clock, Backoff::kReal);
  auto replies = times(30, 0);
  replies.push_back(200);
  server.script(replies);
  const test::LogCapture log;
  const TimePoint start = clock.now();
  auto r = client->get("/api/v1/nodes/a");
  ASSERT_TRUE(r) << r.error().message;
  const auto lasted = clock.now() - start;
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text, "The API server is not answering: GET /api/v1/nodes/a: "), 1U) << text;
  const size_t reminders = occurrences(text, "The API server has not answered for ");
  EXPECT_GE(reminders, 1U) << text;
  EXPECT_LE(reminders, static_cast<size_t>(lasted / OutageLog::kEvery)) << text;
  EXPECT_EQ(occurrences(text, "The API server is answering again after "), 1U) << text;
  EXPECT_EQ(occurrences(text, "warning "), 1 + reminders) << "no warning per attempt:\n" << text;
}

}  // namespace
}  // namespace dm::kube
