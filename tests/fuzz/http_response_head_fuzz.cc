// The status line and header fields of an API server response (a HEAD request: no body follows).
#include "canned_server.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& server = dm::fuzz::canned_server();
  if (!server.respond(dm::fuzz::text(data, size))) return 0;
  dm::kube::HttpRequest req;
  req.method = "HEAD";
  const auto resp = server.perform(req);
  if (resp.status != 0 && (resp.status < 100 || resp.status > 599)) dm::fuzz::fail("status out of range");
  return 0;
}
