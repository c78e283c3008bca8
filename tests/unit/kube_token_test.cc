// TokenSource: a fixed token stays; a token file is re-read when due and after a 401.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kube/token_source.h"
#include "support/doubles.h"
#include "support/process.h"

namespace dm::kube {
namespace {

using namespace std::chrono_literals;

std::string token_of(TokenSource& ts) {
  auto c = ts.current();
  return c ? c->token : "error: " + c.error().message;
}

class TokenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("dm-token");
    file_ = dir_ + "/token";
    test::write_file(file_, "token-a\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  [[nodiscard]] Config file_config() const {
    Config c;
    c.token = "token-a";  // what loading the configuration read
    c.token_file = file_;
    return c;
  }

  std::string dir_;
  std::string file_;
  test::FakeClock clock_;
};

TEST_F(TokenSourceTest, AFixedTokenNeverChanges) {
  Config c;
  c.token = "fixed";
  TokenSource ts(c, clock_, 1min);
  EXPECT_EQ(token_of(ts), "fixed");
  clock_.advance(1h);
  EXPECT_EQ(token_of(ts), "fixed");
  EXPECT_FALSE(ts.renew_after_unauthorized({.token = "fixed"}))
      << "nothing to re-read: repeating cannot help";
  EXPECT_EQ(TokenSource(Config{}, clock_).current()->token, "");
}

TEST_F(TokenSourceTest, TheFileIsReadAgainOnceTheRefreshPeriodPassed) {
  TokenSource ts(file_config(), clock_, 1min);
  test::write_file(file_, "token-b\n");  // the kubelet rotated it
  clock_.advance(59s);
  EXPECT_EQ(token_of(ts), "token-a") << "not due yet";
  clock_.advance(1s);
  EXPECT_EQ(token_of(ts), "token-b");
  test::write_file(file_, "token-c");
  EXPECT_EQ(token_of(ts), "token-b") << "the period starts again at each read";
  clock_.advance(1min);
  EXPECT_EQ(token_of(ts), "token-c");
}

TEST_F(TokenSourceTest, A401ReReadsAtOnceAndSaysWhetherRepeatingCanHelp) {
  TokenSource ts(file_config(), clock_, 1min);
  EXPECT_FALSE(ts.renew_after_unauthorized({.token = "token-a"}))
      << "the file still holds the rejected token";
  test::write_file(file_, "token-b\n");
  EXPECT_TRUE(ts.renew_after_unauthorized({.token = "token-a"}));
  EXPECT_EQ(token_of(ts), "token-b");
  // A second request rejected with the old token (sent concurrently) finds the renewal already done.
  EXPECT_TRUE(ts.renew_after_unauthorized({.token = "token-a"}));
  EXPECT_EQ(token_of(ts), "token-b");
}

TEST_F(TokenSourceTest, AMissingOrEmptyFileKeepsThePreviousTokenAndSaysWhy) {
  test::LogCapture log;
  TokenSource ts(file_config(), clock_, 1min);
  test::write_file(file_, "  \n");
  clock_.advance(1min);
  EXPECT_EQ(token_of(ts), "token-a");
  EXPECT_NE(log.text().find("bearer token file " + file_ + " is empty; using the previous token"),
            std::string::npos)
      << log.text();
  std::filesystem::remove(file_);
  clock_.advance(1min);
  EXPECT_EQ(token_of(ts), "token-a");
  EXPECT_NE(log.text().find("Cannot re-read the bearer token file " + file_), std::string::npos)
      << log.text();
  EXPECT_FALSE(ts.renew_after_unauthorized({.token = "token-a"}));
}

}  // namespace
}  // namespace dm::kube
