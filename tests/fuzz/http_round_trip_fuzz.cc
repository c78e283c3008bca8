// Differential: a response written the way the unit tests' server writes them (status line, Content-Type,
// then Content-Length, chunks of any sizes, or the end of the connection as the framing) must come back
// from the client exactly: the same status, body and Retry-After, streamed or buffered.
#include <fuzzer/FuzzedDataProvider.h>

#include "canned_server.h"
#include "fuzz_support.h"

namespace {

enum class Framing { kContentLength, kChunked, kClose };

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int status = in.ConsumeIntegralInRange(200, 599);
  const auto framing = static_cast<Framing>(in.ConsumeIntegralInRange(0, 2));
  const bool stream = in.ConsumeBool();
  const std::string retry_after = std::to_string(in.ConsumeIntegralInRange(0, 3600));
  const size_t chunk = in.ConsumeIntegralInRange<size_t>(1, 64);
  const std::string body = in.ConsumeRemainingBytesAsString();

  std::string response =
      "HTTP/1.1 " + std::to_string(status) + " Whatever\r\nContent-Type: application/json\r\n";
  response += "Retry-After: " + retry_after + "\r\n";
  if (framing == Framing::kContentLength)
    response += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (framing == Framing::kChunked) response += "Transfer-Encoding: chunked\r\n";
  if (framing == Framing::kClose) response += "Connection: close\r\n";
  response += "\r\n";
  if (framing == Framing::kChunked) {
    char size_hex[32];
    for (size_t at = 0; at < body.size(); at += chunk) {
      const size_t n = std::min(chunk, body.size() - at);
      std::snprintf(size_hex, sizeof size_hex, "%zx\r\n", n);
      response += size_hex + body.substr(at, n) + "\r\n";
    }
    response += "0\r\n\r\n";
  } else {
    response += body;
  }
  // 204 and 304 have no body by definition.
  const bool no_body = status == 204 || status == 304;

  auto& server = dm::fuzz::canned_server();
  if (!server.respond(response)) return 0;
  std::string streamed;
  const auto resp = server.perform({}, stream ? &streamed : nullptr);
  if (!resp.transport_error.empty()) dm::fuzz::fail("transport error: " + resp.transport_error);
  if (resp.status != status) dm::fuzz::fail("status " + std::to_string(resp.status));
  const std::string& got = stream && status < 300 ? streamed : resp.body;
  if (!no_body && got != body) dm::fuzz::fail("body differs");
  if (no_body && !got.empty()) dm::fuzz::fail("a body for a status without one");
  if (resp.retry_after != retry_after) dm::fuzz::fail("Retry-After " + resp.retry_after);
  return 0;
}
