// A chunked body decoded straight from a buffer (kube/http_parse's ChunkedDecoder): fed whole and fed in
// pieces (their size taken from the input's first byte) it must give the same body, end at the same byte
// and refuse the same inputs.
#include "fuzz_support.h"
#include "kube/http_parse.h"

namespace {

struct Decoded {
  bool ok = true;
  bool done = false;
  size_t taken = 0;
  std::string body;
};

Decoded decode(std::string_view in, size_t piece) {
  Decoded out;
  dm::kube::ChunkedDecoder decoder;
  const dm::kube::ChunkedDecoder::Sink sink = [&out](std::string_view bytes) {
    out.body.append(bytes);
    return true;
  };
  for (size_t pos = 0; pos < in.size() && !decoder.done();) {
    const std::string_view part = in.substr(pos, piece);
    const auto taken = decoder.feed(part, sink);
    if (!taken) {
      out.ok = false;
      return out;
    }
    if (*taken > part.size()) dm::fuzz::fail("the decoder took more bytes than it was given");
    out.taken += *taken;
    if (*taken < part.size() && !decoder.done()) dm::fuzz::fail("bytes left over although the body goes on");
    pos += part.size();
  }
  out.done = decoder.done();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 16;
  const std::string_view in = dm::fuzz::text(data + 1, size - 1);
  const Decoded whole = decode(in, in.size() + 1);
  const Decoded pieces = decode(in, piece);
  if (whole.ok != pieces.ok) dm::fuzz::fail("the input is refused whole but not in pieces, or the other way");
  if (!whole.ok) return 0;
  if (whole.done != pieces.done || whole.taken != pieces.taken || whole.body != pieces.body) {
    dm::fuzz::fail("the body decodes differently whole and in pieces");
  }
  if (whole.body.size() > in.size()) dm::fuzz::fail("more body bytes than the input had");
  return 0;
}
