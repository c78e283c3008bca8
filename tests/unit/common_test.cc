// Result/Status, Deadline and the logrus/JSON log line format.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/result.h"
#include "support/doubles.h"

namespace dm {
namespace {

using test::FakeClock;

TEST(Result, HoldsValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = Error("nodes \"x\" not found", 404, "NotFound");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().not_found());
  EXPECT_EQ(bad.error().reason, "NotFound");
}

TEST(Result, WrapPrefixesContextAndKeepsStatus) {
  const Error e = Error("the server is busy", 429, "TooManyRequests").wrap("evicting pod ns/a");
  EXPECT_EQ(e.message, "evicting pod ns/a: the server is busy");
  EXPECT_TRUE(e.too_many_requests());
}

// A host error carries its errno: callers test it, whatever the message says and however it is wrapped.
TEST(Result, HostErrorCarriesItsErrnoThroughWraps) {
  const Error e = Error::from_errno(ENOENT, "cannot open /run/x").wrap("cannot read the state");
  EXPECT_EQ(e.message, std::string("cannot read the state: cannot open /run/x: ") + std::strerror(ENOENT));
  EXPECT_TRUE(e.errno_is(ENOENT));
  EXPECT_FALSE(e.errno_is(EBUSY));
  EXPECT_EQ(e.http_status, 0);
  const Error busy = Error::with_errno(EAGAIN, "module is in use (EAGAIN)");
  EXPECT_EQ(busy.message, "module is in use (EAGAIN)");
  EXPECT_TRUE(busy.errno_is(EAGAIN));
  EXPECT_FALSE(busy.errno_is(EBUSY));
  EXPECT_FALSE(Error("a message that names ENOENT").errno_is(ENOENT));  // no cause without one given
  EXPECT_FALSE(Error("not found", 404, "NotFound").errno_is(0));
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  Status f = Error("boom");
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, "boom");
}

TEST(Deadline, UnlimitedNeverPasses) {
  FakeClock clock;
  const Deadline d;
  clock.advance(std::chrono::hours(1000));
  EXPECT_TRUE(d.unlimited());
  EXPECT_FALSE(d.passed(clock));
  EXPECT_EQ(d.remaining(clock), Duration::max());
}

TEST(Deadline, PassesAfterItsDuration) {
  FakeClock clock;
  const Deadline d = Deadline::after(clock, std::chrono::seconds(10));
  clock.advance(std::chrono::seconds(9));
  EXPECT_FALSE(d.passed(clock));
  EXPECT_EQ(d.remaining(clock), std::chrono::seconds(1));
  clock.advance(std::chrono::seconds(1));
  EXPECT_TRUE(d.passed(clock));
  EXPECT_EQ(d.remaining(clock), Duration::zero());
}

TEST(SystemClock, SleepReturnsFalseWhenCancelled) {
  SystemClock clock;
  CancelToken cancel;
  cancel.cancel();
  EXPECT_FALSE(clock.sleep_for(std::chrono::hours(1), cancel));
}

TEST(CancelToken, ExternalFlagIsShared) {
  std::atomic<bool> flag{false};
  CancelToken a(&flag);
  const CancelToken b = a;  // NOLINT(performance-unnecessary-copy-initialization): the copy is what is tested
  EXPECT_FALSE(b.cancelled());
  flag = true;
  EXPECT_TRUE(a.cancelled());
  EXPECT_TRUE(b.cancelled());
}

TEST(CancelToken, ChildFiresWithItsParentButNotTheOtherWayRound) {
  std::atomic<bool> sigterm{false};
  const CancelToken parent(&sigterm);
  const CancelToken stopped = parent.child();
  stopped.cancel();
  EXPECT_TRUE(stopped.cancelled());
  EXPECT_FALSE(parent.cancelled());

  const CancelToken other = parent.child();
  EXPECT_FALSE(other.cancelled());
  sigterm = true;
  EXPECT_TRUE(other.cancelled());
}

TEST(LogFormat, TextIsLogrusWithoutQuoting) {
  EXPECT_EQ(format_log_line(LogFormat::kText, "warning", "2026-11-30T00:00:00Z", "Cordoning node gpu-1"),
            "time=2026-11-30T00:00:00Z level=warning msg=Cordoning node gpu-1\n");
}

TEST(LogFormat, JsonEscapesTheMessage) {
  const std::string line =
      format_log_line(LogFormat::kJson, "fatal", "2026-11-30T00:00:00Z", "a \"quoted\"\nmulti-line");
  ASSERT_EQ(line.back(), '\n');
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "fatal");
  EXPECT_EQ(j["msg"], "a \"quoted\"\nmulti-line");
  EXPECT_EQ(j["time"], "2026-11-30T00:00:00Z");
}

TEST(LogFormat, ParsesKnownFormatsAndRejectsOthers) {
  EXPECT_EQ(*parse_log_format("json"), LogFormat::kJson);
  EXPECT_EQ(*parse_log_format("text"), LogFormat::kText);
  auto bad = parse_log_format("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("\"yaml\""), std::string::npos);
  EXPECT_TRUE(parse_log_level("warning").ok());
  EXPECT_FALSE(parse_log_level("loud").ok());
}

TEST(LogLevel, ParsedLikeLogrus) {
  // Case-insensitive; every logrus level name; "warn" is "warning".
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"panic", "panic"}, {"FATAL", "fatal"}, {"Error", "error"}, {"warn", "warning"}, {"WARNING", "warning"},
      {"info", "info"},   {"Debug", "debug"}, {"trace", "trace"}, {"TrAcE", "trace"}};
  for (const auto& [in, canonical] : cases) {
    auto l = parse_log_level(in);
    ASSERT_TRUE(l.ok()) << in << ": " << l.error().message;
    EXPECT_EQ(*l, canonical) << in;
  }
  for (const char* bad : {"", "verbose", "warnings", " info"}) {
    auto l = parse_log_level(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_EQ(l.error().message, "invalid log level \"" + std::string(bad) +
                                     "\" (want panic, fatal, error, warning, info, debug or trace)");
  }
}

TEST(LogLevel, TheLevelDecidesWhichLinesAreWritten) {
  const auto shown = [](const char* level) {
    setup_logging(LogFormat::kText, level);
    const auto* logger = spdlog::default_logger_raw();
    std::string out;
    for (auto l : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                   spdlog::level::err, spdlog::level::critical}) {
      out += logger->should_log(l) ? "1" : "0";
    }
    return out;
  };
  EXPECT_EQ(shown("TRACE"), "111111");
  EXPECT_EQ(shown("debug"), "011111");
  EXPECT_EQ(shown("Info"), "001111");
  EXPECT_EQ(shown("warn"), "000111");
  EXPECT_EQ(shown("error"), "000011");
  EXPECT_EQ(shown("fatal"), "000001");
  EXPECT_EQ(shown("panic"), "000001");
  setup_logging(LogFormat::kText, "info");
}

}  // namespace
}  // namespace dm
