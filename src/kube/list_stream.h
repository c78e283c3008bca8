// Parsing a List response while it arrives: each item is parsed (and reduced) as soon as its text is
// complete, so neither the whole response text nor an unreduced item list is ever held.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dm::kube {

class ListBodyParser {
 public:
  // Turns one item's text into its JSON (a discarded value when the text is not JSON).
  using ItemParser = std::function<nlohmann::json(std::string_view text)>;
  explicit ListBodyParser(ItemParser parse_item) : parse_item_(std::move(parse_item)) {}

  // Takes the next piece of the response text (pieces may split it anywhere).
  void feed(std::string_view chunk);
  // The List object, its `items` filled with the parsed items; a discarded value when the text was not
  // JSON. Nothing fed at all: an empty object (a 2xx without a body).
  nlohmann::json finish();

 private:
  void at_depth_one(char c);
  void in_items(char c);
  // Inside a string: follows escapes and the closing quote (after which in_string_ is false).
  void string_char(char c);

  ItemParser parse_item_;
  bool fed_ = false;
  bool broken_ = false;  // an item did not parse, or the brackets do not match
  int depth_ = 0;        // open { and [ outside strings
  bool in_string_ = false;
  bool escaped_ = false;  // the previous character of a string was a backslash
  // The List without its items' text ("items": []), then parsed as a whole.
  std::string rest_;
  // The top-level object's last string as written (escapes included), and the key whose value follows (after
  // its ':'), decoded.
  std::string last_string_;
  std::string key_;
  bool items_open_ = false;  // inside the top-level "items" array
  std::string item_;         // text of the item being read (depth 3 and deeper)
  std::vector<nlohmann::json> items_;
};

}  // namespace dm::kube
