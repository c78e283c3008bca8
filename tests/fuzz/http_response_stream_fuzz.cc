// A whole response as the client reads it: head, then a body framed by Content-Length, chunks or the end
// of the connection, read once buffered and once streamed (as 2xx list and watch bodies are).
#include "canned_server.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& server = dm::fuzz::canned_server();
  if (!server.respond(dm::fuzz::text(data, size))) return 0;
  for (const bool stream : {false, true}) {
    std::string streamed;
    const auto resp = server.perform({}, stream ? &streamed : nullptr);
    if (resp.body.size() + streamed.size() > size) dm::fuzz::fail("more body bytes than the response had");
  }
  return 0;
}
