// The container's termination message: where it goes, how much of it, and a path that cannot be written.
#include "common/termination_message.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/process.h"

namespace dm {
namespace {

TEST(TerminationMessageTest, ThePathIsTheKubeletsDefaultUnlessTheEnvironmentNamesOne) {
  EXPECT_EQ(termination_message_path(nullptr), "/dev/termination-log");
  EXPECT_EQ(termination_message_path(""), "/dev/termination-log");
  EXPECT_EQ(termination_message_path("/tmp/t"), "/tmp/t");
}

TEST(TerminationMessageTest, TheMessageReplacesTheFileAndIsCutAtTheKubeletsLimit) {
  const std::string dir = test::make_temp_dir("dm-termination");
  const std::string path = dir + "/termination-log";
  test::write_file(path, "an older, longer message of an earlier attempt");
  write_termination_message(path, "cannot evict pod gpu/a");
  EXPECT_EQ(test::read_file(path), "cannot evict pod gpu/a");

  write_termination_message(path, std::string(5000, 'x'));
  EXPECT_EQ(test::read_file(path), std::string(kMaxTerminationMessage, 'x'));
  EXPECT_EQ(kMaxTerminationMessage, 4096U);
  std::filesystem::remove_all(dir);
}

TEST(TerminationMessageTest, APathThatCannotBeOpenedIsSkipped) {
  const std::string dir = test::make_temp_dir("dm-termination");
  write_termination_message(dir + "/missing/termination-log", "reason");
  EXPECT_FALSE(std::filesystem::exists(dir + "/missing"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dm
