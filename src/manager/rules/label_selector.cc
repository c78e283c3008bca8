#include "manager/rules/label_selector.h"

#include <cctype>

namespace dm::manager {

using Json = nlohmann::json;

namespace {

bool label_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.' || c == '/';
}

}  // namespace

// Reads a selector left to right; an error names the position it stopped at.
class LabelSelector::Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), quoted_("\"" + std::string(text) + "\"") {}

  // The comma-separated requirements, all of them (none for an empty selector).
  Result<std::vector<Requirement>> requirements() {
    std::vector<Requirement> out;
    ws();
    if (at_end()) return out;
    while (true) {
      ws();
      auto r = requirement();
      if (!r) return r.error();
      out.push_back(std::move(*r));
      ws();
      if (at_end()) break;
      if (text_[i_] != ',') return error("expected ','");
      ++i_;
    }
    return out;
  }

 private:
  // One of `!k`, `k`, `k=v`, `k==v`, `k!=v`, `k in (...)`, `k notin (...)`.
  Result<Requirement> requirement() {
    Requirement r;
    if (!at_end() && text_[i_] == '!') {
      ++i_;
      ws();
      r.key = word();
      r.op = Op::kNotExists;
      if (r.key.empty()) return error("missing key after '!'");
      return r;
    }
    r.key = word();
    if (r.key.empty()) return error("missing key");
    ws();
    if (at_end() || text_[i_] == ',') {
      r.op = Op::kExists;
      return r;
    }
    if (text_.substr(i_, 2) == "==" || text_.substr(i_, 2) == "!=" || text_[i_] == '=') {
      if (text_[i_] == '!') {
        r.op = Op::kNotEq;
        i_ += 2;
      } else {
        r.op = Op::kEq;
        i_ += text_.substr(i_, 2) == "==" ? 2 : 1;
      }
      ws();
      r.values.push_back(word());
      return r;
    }
    const std::string op = word();
    if (op != "in" && op != "notin") return error("expected one of =, ==, !=, in, notin");
    r.op = op == "in" ? Op::kIn : Op::kNotIn;
    ws();
    if (at_end() || text_[i_] != '(') return error("expected '(' after " + op);
    ++i_;
    auto values = value_list();
    if (!values) return values.error();
    r.values = std::move(*values);
    return r;
  }

  // The values of `in (...)` and `notin (...)`, after the '(' up to and past the ')'.
  Result<std::vector<std::string>> value_list() {
    std::vector<std::string> values;
    while (true) {
      ws();
      values.push_back(word());
      ws();
      if (!at_end() && text_[i_] == ',') {
        ++i_;
        continue;
      }
      if (!at_end() && text_[i_] == ')') {
        ++i_;
        return values;
      }
      return error("expected ',' or ')' in value list");
    }
  }

  [[nodiscard]] bool at_end() const { return i_ == text_.size(); }
  void ws() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[i_])) != 0) ++i_;
  }
  std::string word() {
    const size_t start = i_;
    while (!at_end() && label_char(text_[i_])) ++i_;
    return std::string(text_.substr(start, i_ - start));
  }
  [[nodiscard]] Error error(const std::string& why) const {
    return Error("invalid label selector " + quoted_ + ": " + why + " at position " + std::to_string(i_));
  }

  std::string_view text_;
  std::string quoted_;
  size_t i_ = 0;
};

Result<LabelSelector> LabelSelector::parse(std::string_view text) {
  LabelSelector sel;
  sel.text_ = std::string(text);
  auto requirements = Parser(text).requirements();
  if (!requirements) return requirements.error();
  sel.requirements_ = std::move(*requirements);
  return sel;
}

bool LabelSelector::matches(const Json& labels) const {
  for (const auto& r : requirements_) {
    const bool has = labels.is_object() && labels.contains(r.key) && labels[r.key].is_string();
    const std::string v = has ? labels[r.key].get<std::string>() : std::string();
    const bool in_values = has && std::find(r.values.begin(), r.values.end(), v) != r.values.end();
    bool ok = false;
    switch (r.op) {
      case Op::kEq:
      case Op::kIn:
        ok = in_values;
        break;
      case Op::kNotEq:
      case Op::kNotIn:
        ok = !in_values;
        break;
      case Op::kExists:
        ok = has;
        break;
      case Op::kNotExists:
        ok = !has;
        break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace dm::manager
