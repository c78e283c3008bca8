#include "manager/rules/label_selector.h"

#include <cctype>

namespace dm::manager {

using Json = nlohmann::json;

namespace {

bool label_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.' || c == '/';
}

}  // namespace

Result<LabelSelector> LabelSelector::parse(std::string_view text) {
  LabelSelector sel;
  sel.text_ = std::string(text);
  const std::string quoted = "\"" + std::string(text) + "\"";
  size_t i = 0;
  auto ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
  };
  auto word = [&] {
    const size_t start = i;
    while (i < text.size() && label_char(text[i])) ++i;
    return std::string(text.substr(start, i - start));
  };
  auto error = [&](const std::string& why) {
    return Error("invalid label selector " + quoted + ": " + why + " at position " + std::to_string(i));
  };
  ws();
  if (i == text.size()) return sel;
  while (true) {
    ws();
    Requirement r;
    if (i < text.size() && text[i] == '!') {
      ++i;
      ws();
      r.key = word();
      r.op = Op::kNotExists;
      if (r.key.empty()) return error("missing key after '!'");
    } else {
      r.key = word();
      if (r.key.empty()) return error("missing key");
      ws();
      if (i == text.size() || text[i] == ',') {
        r.op = Op::kExists;
      } else if (text.substr(i, 2) == "==" || text.substr(i, 2) == "!=" || text[i] == '=') {
        if (text[i] == '!') {
          r.op = Op::kNotEq;
          i += 2;
        } else {
          r.op = Op::kEq;
          i += text.substr(i, 2) == "==" ? 2 : 1;
        }
        ws();
        r.values.push_back(word());
      } else {
        const std::string op = word();
        if (op != "in" && op != "notin") return error("expected one of =, ==, !=, in, notin");
        r.op = op == "in" ? Op::kIn : Op::kNotIn;
        ws();
        if (i == text.size() || text[i] != '(') return error("expected '(' after " + op);
        ++i;
        while (true) {
          ws();
          r.values.push_back(word());
          ws();
          if (i < text.size() && text[i] == ',') {
            ++i;
            continue;
          }
          if (i < text.size() && text[i] == ')') {
            ++i;
            break;
          }
          return error("expected ',' or ')' in value list");
        }
      }
    }
    sel.requirements_.push_back(std::move(r));
    ws();
    if (i == text.size()) break;
    if (text[i] != ',') return error("expected ','");
    ++i;
  }
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
