// The API server's URL as a kubeconfig or the in-cluster environment gives it (kube/http_exchange.h,
// parse_url). Differential: what is accepted is put back together from its parts into the same text (scheme,
// Host header, path), the host has no brackets, the port is digits only and the default port is the scheme's.
#include <string>

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
  if (url.compare(scheme.size(), t->authority.size(), t->authority) != 0) dm::fuzz::fail("authority not the URL's");
  if (path_as_written.empty() ? t->path != "/" : t->path != path_as_written) dm::fuzz::fail("path not the URL's");
  if (t->host.empty() || t->host.find_first_of("[]/@") != std::string::npos) dm::fuzz::fail("host");
  if (t->port.empty() || t->port.size() > 5 || t->port.find_first_not_of("0123456789") != std::string::npos)
    dm::fuzz::fail("port");
  if (t->authority.find(':') == std::string::npos && t->port != (t->tls ? "443" : "80"))
    dm::fuzz::fail("default port");
  return 0;
}
