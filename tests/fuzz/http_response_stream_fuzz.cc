// A whole response as the client reads it: head, then a body framed by Content-Length, chunks or the end
// of the connection, read once buffered and once streamed (as 2xx list and watch bodies are).
#include "fuzz_support.h"
#include "loopback_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& server = dm::fuzz::loopback_server();
  server.respond(dm::fuzz::text(data, size));
  for (const bool stream : {false, true}) {
    std::string streamed;
    const auto resp = server.perform({}, stream ? &streamed : nullptr);
    if (resp.body.size() + streamed.size() > size) dm::fuzz::fail("more body bytes than the response had");
  }
  return 0;
}
