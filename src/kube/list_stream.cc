#include "kube/list_stream.h"

#include <utility>

namespace dm::kube {

using Json = nlohmann::json;

namespace {

// A key's text as written, decoded: "item\"s" is not "items", "\u0069tems" is. Text that does not decode
// is kept as it is (the List then does not parse as a whole either).
std::string decoded_key(const std::string& written) {
  if (written.find('\\') == std::string::npos) return written;
  const Json key = Json::parse('"' + written + '"', nullptr, false);
  return key.is_string() ? key.get<std::string>() : written;
}

}  // namespace

void ListBodyParser::feed(std::string_view chunk) {
  if (!chunk.empty()) fed_ = true;
  for (const char c : chunk) {
    if (items_open_) {
      in_items(c);
      continue;
    }
    rest_.push_back(c);
    if (in_string_) {
      // The string's text as written, escapes included (the closing quote is the one character that ends
      // it): a key is decoded only when its ':' shows it is one.
      string_char(c);
      if (in_string_ && depth_ == 1) last_string_.push_back(c);
      continue;
    }
    at_depth_one(c);
  }
}

void ListBodyParser::string_char(char c) {
  if (escaped_) {
    escaped_ = false;
  } else if (c == '\\') {
    escaped_ = true;
  } else if (c == '"') {
    in_string_ = false;
  }
}

// Outside strings, outside the items array.
void ListBodyParser::at_depth_one(char c) {
  switch (c) {
    case '"':
      in_string_ = true;
      last_string_.clear();
      break;
    case ':':
      if (depth_ == 1) key_ = decoded_key(last_string_);
      break;
    case '[':
      if (depth_ == 1 && key_ == "items") items_open_ = true;
      ++depth_;
      break;
    case '{':
      ++depth_;
      break;
    case '}':
    case ']':
      if (--depth_ < 0) broken_ = true;
      break;
    default:
      break;
  }
}

// Inside the items array (depth 2 and deeper): an item's text is collected and parsed once it closes; the
// commas and blanks between items are left out of rest_.
void ListBodyParser::in_items(char c) {
  if (depth_ > 2) item_.push_back(c);
  if (in_string_) {
    string_char(c);
    return;
  }
  switch (c) {
    case '"':
      in_string_ = true;  // a string item: skipped (a List's items are objects)
      break;
    case '{':
    case '[':
      if (++depth_ == 3) item_.push_back(c);
      break;
    case '}':
    case ']':
      if (depth_ == 2) {  // the items array ends
        items_open_ = false;
        depth_ = 1;
        rest_.push_back(']');
        break;
      }
      if (--depth_ == 2) {
        Json item = parse_item_(item_);
        item_.clear();
        if (item.is_discarded()) {
          broken_ = true;
        } else {
          items_.push_back(std::move(item));
        }
      }
      break;
    default:
      break;
  }
}

Json ListBodyParser::finish() {
  if (!fed_) return Json::object();
  if (broken_ || depth_ != 0 || in_string_ || items_open_) return Json(Json::value_t::discarded);
  Json list = Json::parse(rest_, nullptr, false);
  rest_.clear();
  rest_.shrink_to_fit();
  if (list.is_discarded() || !list.is_object()) return Json(Json::value_t::discarded);
  auto it = list.find("items");
  if (it != list.end() && it->is_array()) {
    auto& array = it->get_ref<Json::array_t&>();
    array = std::move(items_);
  }
  items_.clear();
  return list;
}

}  // namespace dm::kube
