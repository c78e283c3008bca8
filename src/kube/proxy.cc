#include "kube/proxy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace dm::kube {
namespace {

std::string env_either(const char* upper, const char* lower) {
  if (const char* v = std::getenv(upper); v != nullptr && *v != '\0')
    return v;                                                      // NOLINT(concurrency-mt-unsafe)
  if (const char* v = std::getenv(lower); v != nullptr) return v;  // NOLINT(concurrency-mt-unsafe)
  return {};
}

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// An IP literal as bytes (4 or 16), or nullopt for a name.
struct Ip {
  std::array<unsigned char, 16> bytes{};
  size_t len = 0;
};
std::optional<Ip> parse_ip(const std::string& s) {
  Ip ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.len = 4;
    return ip;
  }
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.len = 16;
    return ip;
  }
  return std::nullopt;
}

bool is_loopback(const Ip& ip) {
  if (ip.len == 4) return ip.bytes[0] == 127;
  static const std::array<unsigned char, 16> kV6Loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return ip.bytes == kV6Loopback;
}

bool in_cidr(const Ip& ip, const Ip& net, int bits) {
  if (ip.len != net.len || bits < 0 || static_cast<size_t>(bits) > ip.len * 8) return false;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const auto mask = static_cast<unsigned char>(bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff);
    if ((ip.bytes[i] & mask) != (net.bytes[i] & mask)) return false;
  }
  return true;
}

// Splits "host:port", "[v6]:port", "[v6]" or a bare host (an unbracketed IPv6 address has no port).
std::pair<std::string, std::string> split_host_port(std::string_view s) {
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) return {std::string(s), ""};
    const std::string_view rest = s.substr(close + 1);
    return {std::string(s.substr(1, close - 1)),
            rest.size() > 1 && rest[0] == ':' ? std::string(rest.substr(1)) : ""};
  }
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || s.find(':') != colon) return {std::string(s), ""};
  return {std::string(s.substr(0, colon)), std::string(s.substr(colon + 1))};
}

// Whether one NO_PROXY entry covers host:port.
bool no_proxy_matches(std::string_view entry, const std::string& host, const std::optional<Ip>& host_ip,
                      std::string_view port) {
  if (entry == "*") return true;
  if (const size_t slash = entry.find('/'); slash != std::string_view::npos) {
    const auto net = parse_ip(std::string(entry.substr(0, slash)));
    char* end = nullptr;
    const std::string bits_text(entry.substr(slash + 1));
    const long bits = std::strtol(bits_text.c_str(), &end, 10);
    return net && host_ip && end != bits_text.c_str() && *end == '\0' &&
           in_cidr(*host_ip, *net, static_cast<int>(bits));
  }
  auto [name, entry_port] = split_host_port(entry);
  if (!entry_port.empty() && entry_port != port) return false;
  if (const auto ip = parse_ip(name))
    return host_ip && ip->len == host_ip->len && ip->bytes == host_ip->bytes;
  if (host_ip) return false;
  name = lower(name);
  if (name.size() > 2 && name.compare(0, 2, "*.") == 0) name.erase(0, 1);  // "*.example.com" = ".example.com"
  if (!name.empty() && name.front() == '.') {                              // ".example.com": subdomains only
    return host.size() > name.size() && host.compare(host.size() - name.size(), name.size(), name) == 0;
  }
  if (host == name) return true;  // "example.com": the domain and its subdomains
  return host.size() > name.size() && host.compare(host.size() - name.size(), name.size(), name) == 0 &&
         host[host.size() - name.size() - 1] == '.';
}

}  // namespace

ProxyEnv proxy_env_from_environment() {
  return ProxyEnv{env_either("HTTPS_PROXY", "https_proxy"), env_either("NO_PROXY", "no_proxy")};
}

Result<std::optional<ProxyEndpoint>> proxy_for(const ProxyEnv& env, std::string_view host_in,
                                               std::string_view port) {
  const std::string_view setting = trim(env.https_proxy);
  if (setting.empty()) return std::optional<ProxyEndpoint>{};
  const std::string host = lower(host_in);
  const auto host_ip = parse_ip(host);
  if (host == "localhost" || (host_ip && is_loopback(*host_ip))) return std::optional<ProxyEndpoint>{};
  std::string_view list = env.no_proxy;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view entry = trim(list.substr(0, comma));
    if (!entry.empty() && no_proxy_matches(entry, host, host_ip, port)) return std::optional<ProxyEndpoint>{};
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }

  std::string_view rest = setting;
  const std::string what = "HTTPS_PROXY \"" + std::string(setting) + "\"";
  if (const size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    if (lower(rest.substr(0, scheme)) != "http") {
      return Error(what + ": only http:// proxies are supported (HTTP CONNECT)");
    }
    rest.remove_prefix(scheme + 3);
  }
  rest = rest.substr(0, rest.find('/'));
  if (rest.find('@') != std::string_view::npos) return Error(what + ": proxy credentials are not supported");
  auto [phost, pport] = split_host_port(rest);
  if (phost.empty()) return Error(what + ": no proxy host");
  if (pport.empty()) pport = "80";
  if (pport.find_first_not_of("0123456789") != std::string::npos) return Error(what + ": bad port");
  return std::optional<ProxyEndpoint>{ProxyEndpoint{phost, pport}};
}

}  // namespace dm::kube
