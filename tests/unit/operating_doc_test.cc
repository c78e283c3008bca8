// docs/operating.md's catalogue is the code's, both ways: every node/pod key, taint key, Event reason and
// exit code driver-manager defines is a row of the doc's tables, and every row is one the code defines.
//
// Where the test reads the code (src/, every .h and .cc):
//  * keys: each string constant whose value starts with "nvidia.com/" - a line matching
//    `constexpr <type> kName = "nvidia.com/...";` on one line - cut at the first '=' or ':' (a selector's
//    value, a taint's effect); a value ending in '.' is a prefix, documented as `<prefix>*`. Plus every label
//    key of the operand table (manager::operand_table()), built from the prefix in operands.cc;
//  * Event reasons: every `.event("Reason"` call, the reason on the call's line (NodeOps::event, the one
//    way an Event is sent);
//  * exit codes: every `constexpr int kExit... = N;`.
// Where it reads the doc: the first column of the tables under "### Labels", "### Annotations",
// "### Taints" (the backticked key, cut as above), "### Events" and "### Exit codes".
// deploy/prometheus-rules.yaml is held to the same keys: each kube-state-metrics label it names
// (annotation_<key>, label_<key>) is a documented key, and each alert has its row in the doc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "manager/rules/operands.h"
#include "support/process.h"

namespace dm::manager {
namespace {

namespace fs = std::filesystem;

// Every line of src/ (read once).
const std::vector<std::string>& source_lines() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(test::source_path("src"))) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
      std::istringstream in(test::read_file(e.path()));
      for (std::string line; std::getline(in, line);) out.push_back(line);
    }
    return out;
  }();
  return lines;
}

// The first group of `re` on every line of src/ that holds `needle` (the regex only where it can match).
std::set<std::string> matches(const std::string& needle, const std::regex& re) {
  std::set<std::string> out;
  for (const auto& line : source_lines()) {
    if (line.find(needle) == std::string::npos) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), re), end; it != end; ++it) out.insert((*it)[1]);
  }
  return out;
}

// "nvidia.com/gpu:NoSchedule" -> "nvidia.com/gpu"; "nvidia.com/gpu.deploy." -> "nvidia.com/gpu.deploy.*".
std::string key_of(const std::string& value) {
  std::string k = value.substr(0, value.find_first_of("=:"));
  if (k.ends_with('.')) k += '*';
  return k;
}

std::set<std::string> code_keys() {
  std::set<std::string> out;
  for (const auto& v :
       matches("nvidia.com/", std::regex(R"re(constexpr[^=;]*\bk\w+\s*=\s*"(nvidia\.com/[^"]*)";)re"))) {
    out.insert(key_of(v));
  }
  for (const auto& row : operand_table()) out.insert(row.label_key);
  return out;
}

// The first cells of the table under `heading` (up to the next heading).
std::vector<std::string> first_cells(const std::string& doc, const std::string& heading) {
  std::vector<std::string> out;
  const auto at = doc.find("\n" + heading + "\n");
  EXPECT_NE(at, std::string::npos) << "docs/operating.md has no section " << heading;
  if (at == std::string::npos) return out;
  std::istringstream lines(doc.substr(at + heading.size() + 2));
  for (std::string line; std::getline(lines, line) && !line.starts_with("#");) {
    if (!line.starts_with("| ") || line.starts_with("|---")) continue;
    out.push_back(line.substr(2, line.find(" |", 2) - 2));
  }
  if (!out.empty()) out.erase(out.begin());  // the header row
  return out;
}

std::string unquoted(const std::string& cell) {
  return cell.size() >= 2 && cell.front() == '`' && cell.back() == '`' ? cell.substr(1, cell.size() - 2)
                                                                       : cell;
}

std::string doc() {
  return test::read_file(test::source_path("docs/operating.md"));
}

TEST(OperatingDoc, EveryKeyTheCodeDefinesIsInTheCatalogueAndNothingElse) {
  const auto code = code_keys();
  ASSERT_TRUE(code.contains("nvidia.com/gpu-driver-manager.state")) << "the pattern finds node_keys.h";
  ASSERT_TRUE(code.contains("nvidia.com/gpu.deploy.operator-validator")) << "and the operand table";
  std::set<std::string> documented;
  const std::string text = doc();
  for (const char* section : {"### Labels", "### Annotations", "### Taints"}) {
    for (const auto& cell : first_cells(text, section)) {
      EXPECT_TRUE(documented.insert(key_of(unquoted(cell))).second) << cell << " documented twice";
    }
  }
  for (const auto& k : code) EXPECT_TRUE(documented.contains(k)) << k << " is not in docs/operating.md";
  for (const auto& k : documented) EXPECT_TRUE(code.contains(k)) << k << " is in the doc but not in src/";
}

TEST(OperatingDoc, EveryEventReasonIsInTheCatalogueAndNothingElse) {
  const auto code = matches(".event(", std::regex(R"re(\.event\(\s*"(\w+)")re"));
  ASSERT_TRUE(code.contains("DriverUninstallFailed")) << "the pattern finds the Events";
  std::set<std::string> documented;
  for (const auto& cell : first_cells(doc(), "### Events")) documented.insert(unquoted(cell));
  EXPECT_EQ(documented, code);
}

TEST(OperatingDoc, EveryExitCodeIsInTheCatalogueAndNothingElse) {
  const auto code = matches("kExit", std::regex(R"re(constexpr\s+int\s+kExit\w*\s*=\s*(\d+)\s*;)re"));
  ASSERT_TRUE(code.contains("143")) << "the pattern finds the exit codes";
  std::set<std::string> documented;
  for (const auto& cell : first_cells(doc(), "### Exit codes")) documented.insert(unquoted(cell));
  EXPECT_EQ(documented, code);
}

// kube-state-metrics writes a key as a Prometheus label: every character that is not a letter, a digit
// or '_' becomes '_'.
std::string metric_label(const std::string& prefix, const std::string& key) {
  return prefix + std::regex_replace(key, std::regex("[^A-Za-z0-9_]"), "_");
}

TEST(OperatingDoc, TheAlertRulesNameDocumentedKeysAndEachAlertIsDocumented) {
  const std::string rules = test::read_file(test::source_path("deploy/prometheus-rules.yaml"));
  // The node label the rules read is the upgrade controller's, not driver-manager's: documented in prose.
  std::set<std::string> known = {metric_label("label_", "nvidia.com/gpu-driver-upgrade-state")};
  for (const auto& k : code_keys()) {
    known.insert(metric_label("annotation_", k));
    known.insert(metric_label("label_", k));
  }
  const std::regex used(R"re(\b((?:annotation|label)_nvidia_com_\w+))re");
  size_t seen = 0;
  for (std::sregex_iterator it(rules.begin(), rules.end(), used), end; it != end; ++it, ++seen) {
    EXPECT_TRUE(known.contains((*it)[1])) << (*it)[1] << " names no key of driver-manager's";
  }
  EXPECT_GT(seen, 0U);
  const std::string text = doc();
  EXPECT_NE(text.find("nvidia.com/gpu-driver-upgrade-state"), std::string::npos);
  const std::regex alert(R"re(- alert: (\w+))re");
  size_t alerts = 0;
  for (std::sregex_iterator it(rules.begin(), rules.end(), alert), end; it != end; ++it, ++alerts) {
    EXPECT_NE(text.find("| `" + std::string((*it)[1]) + "` |"), std::string::npos)
        << (*it)[1] << " has no row in docs/operating.md, Alerts";
  }
  EXPECT_GT(alerts, 0U);
}

}  // namespace
}  // namespace dm::manager
