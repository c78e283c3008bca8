// The API server's URL as a kubeconfig or the in-cluster environment gives it (kube/http_exchange.h,
// parse_url). Differential: what is accepted is put back together from its parts into the same text (scheme,
// Host header, path), the host has no brackets, the port is digits only and the default port is the scheme's.
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "kube/http_exchange.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(dm::fuzz::text(data, size));
  const auto t = dm::kube::http_detail::parse_url(url);
  if (!t) {
    if (t.error().message.empty()) dm::fuzz::fail("a refused URL without a reason");
    return 0;
  }
  const std::string scheme = t->tls ? "https://" : "http://";
  const std::string path_as_written = url.substr(scheme.size() + t->authority.size());
  if (url.compare(0, scheme.size(), scheme) != 0) dm::fuzz::fail("scheme not the URL's");
  if (url.compare(scheme.size(), t->authority.size(), t->authority) != 0)
    dm::fuzz::fail("authority not the URL's");
  // A query or fragment right after the authority is the root path's.
  const std::string expected_path = path_as_written.empty()          ? "/"
                                    : path_as_written.front() == '/' ? path_as_written
                                                                     : "/" + path_as_written;
  if (t->path != expected_path) dm::fuzz::fail("path not the URL's");
  if (t->authority.find_first_of("/?#") != std::string::npos) dm::fuzz::fail("authority runs into the path");
  for (const char c : t->host) {
    if (c <= ' ' || c >= 127 || std::string_view("[]/@?#\"<>\\^`{|}").find(c) != std::string_view::npos)
      dm::fuzz::fail("a character no host has");
  }
  if (t->host.empty()) dm::fuzz::fail("empty host");
  if (t->port.empty() || t->port.size() > 5 || t->port.find_first_not_of("0123456789") != std::string::npos)
    dm::fuzz::fail("port");
  if (t->authority.find(':') == std::string::npos && t->port != (t->tls ? "443" : "80"))
    dm::fuzz::fail("default port");
  return 0;
}
