// Kubernetes label selectors as DRAIN_POD_SELECTOR_LABEL takes them (kubectl drain --pod-selector).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::manager {

// A Kubernetes label selector: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
// comma-separated (all must hold). Empty = matches everything.
class LabelSelector {
 public:
  LabelSelector() = default;
  // Errors quote the selector and say what is wrong.
  static Result<LabelSelector> parse(std::string_view text);
  [[nodiscard]] bool matches(const nlohmann::json& labels) const;  // labels: metadata.labels (object or null)
  [[nodiscard]] bool empty() const { return requirements_.empty(); }
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  enum class Op { kEq, kNotEq, kIn, kNotIn, kExists, kNotExists };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  class Parser;  // label_selector.cc
  std::string text_;
  std::vector<Requirement> requirements_;
};

}  // namespace dm::manager
