// A chunked response body (chunk sizes, extensions, chunk ends, trailer fields), streamed piece by piece as
// list and watch bodies are.
#include "canned_server.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& server = dm::fuzz::canned_server();
  if (!server.respond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                      std::string(dm::fuzz::text(data, size))))
    return 0;
  std::string streamed;
  (void)server.perform({}, &streamed);
  // The body can only be made of bytes that were sent.
  if (streamed.size() > size) dm::fuzz::fail("more body bytes than the response had");
  return 0;
}
