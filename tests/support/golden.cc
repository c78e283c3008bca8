#include "support/golden.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "support/process.h"

namespace dm::test {

std::string normalise_pod_names(const std::string& text) {
  std::string t = std::regex_replace(
      text, std::regex("(/[a-z0-9.-]+?)-[bcdfghjklmnpqrstvwxz2-9]{8,10}-[bcdfghjklmnpqrstvwxz2-9]{5}\\b"),
      "$1-<rs>-<pod>");
  t = std::regex_replace(t, std::regex("(/[a-z0-9-]+)-[bcdfghjklmnpqrstvwxz2-9]{5}\\b"), "$1-<pod>");
  return std::regex_replace(t, std::regex("(\\S) {2,}"), "$1  ");
}

void expect_golden(const std::string& rel, const std::string& got) {
  const std::string path = source_path("tests/fixtures/" + rel);
  if (std::getenv("DM_UPDATE_GOLDEN") != nullptr) write_file(path, got);
  EXPECT_EQ(got, read_file(path)) << "golden " << path << " (DM_UPDATE_GOLDEN=1 rewrites it)";
}

}  // namespace dm::test
