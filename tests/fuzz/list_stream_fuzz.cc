// The streaming List parser (kube/list_stream), fed in pieces cut anywhere. Differential: the result does
// not depend on where the pieces were cut, and for a List whose items are all objects it equals parsing the
// whole text at once.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "kube/list_stream.h"

namespace {

using Json = nlohmann::json;

Json plain(std::string_view text) {
  return Json::parse(text, nullptr, false);
}

// The whole text is an object with at most one top-level "items", an array of objects. Without NUL bytes:
// nlohmann's parser takes a NUL for the end of the input, so "{}\0junk" is "{}" to it as a whole, while
// the List parser sees the junk.
bool comparable(const Json& whole, std::string_view text) {
  if (!whole.is_object() || text.find('\0') != std::string_view::npos) return false;
  int items_keys = 0;
  (void)Json::parse(text, [&](int depth, Json::parse_event_t ev, Json& parsed) {
    if (depth == 1 && ev == Json::parse_event_t::key && parsed == "items") ++items_keys;
    return true;
  });
  if (items_keys > 1) return false;
  const auto it = whole.find("items");
  if (it == whole.end() || !it->is_array()) return true;
  for (const auto& item : *it) {
    if (!item.is_object()) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0] % 16 + 1;  // the first byte: the piece size
  const std::string_view text = dm::fuzz::text(data + 1, size - 1);

  dm::kube::ListBodyParser at_once(plain);
  at_once.feed(text);
  const Json a = at_once.finish();
  dm::kube::ListBodyParser in_pieces(plain);
  for (size_t at = 0; at < text.size(); at += piece) in_pieces.feed(text.substr(at, piece));
  const Json b = in_pieces.finish();
  if (a.is_discarded() != b.is_discarded() || (!a.is_discarded() && a != b)) dm::fuzz::fail("pieces differ");

  if (text.empty()) return 0;
  const Json whole = plain(text);
  if (!whole.is_discarded() && comparable(whole, text) && (a.is_discarded() || a != whole))
    dm::fuzz::fail("differs from parsing the whole text");
  return 0;
}
