// DRAIN_POD_SELECTOR_LABEL (manager/label_selector): the selector text, then matching it against labels
// read from the rest of the input ("key=value" lines after the first line).
#include "fuzz_support.h"
#include "manager/rules/label_selector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = dm::fuzz::split(dm::fuzz::text(data, size), "\n");
  auto selector = dm::manager::LabelSelector::parse(parts[0]);
  if (!selector) return 0;
  nlohmann::json labels = nlohmann::json::object();
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    labels[std::string(parts[i].substr(0, eq))] =
        eq == std::string_view::npos ? std::string() : std::string(parts[i].substr(eq + 1));
  }
  const bool matched = selector->matches(labels);
  if (selector->empty() && !matched) dm::fuzz::fail("an empty selector must match everything");
  // The selector keeps its text and parses the same from it.
  auto again = dm::manager::LabelSelector::parse(selector->text());
  if (!again || again->matches(labels) != matched) dm::fuzz::fail("the selector's text parses differently");
  return 0;
}
