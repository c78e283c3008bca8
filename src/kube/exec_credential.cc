#include "kube/exec_credential.h"

#include <yaml-cpp/binary.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dm::kube {
namespace {

using Json = nlohmann::json;

// Digits [pos, pos + n) of `s` as a number, or -1.
int digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// A string field of `obj`, "" when absent; an error when it is there with another type.
Result<std::string> string_field(const Json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Error(where + "." + key + " is not a string");
  return it->get<std::string>();
}

Result<ExecCredential> read_status(const Json& status) {
  ExecCredential c;
  auto token = string_field(status, "token", "status");
  if (!token) return token.error();
  auto cert = string_field(status, "clientCertificateData", "status");
  if (!cert) return cert.error();
  auto key = string_field(status, "clientKeyData", "status");
  if (!key) return key.error();
  auto expiry = string_field(status, "expirationTimestamp", "status");
  if (!expiry) return expiry.error();
  c.token = std::move(*token);
  c.client_cert_pem = std::move(*cert);
  c.client_key_pem = std::move(*key);
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    return Error(std::string("its status has a ") + (c.client_key_pem.empty()
                                                         ? "clientCertificateData but no clientKeyData"
                                                         : "clientKeyData but no clientCertificateData"));
  }
  if (c.token.empty() && c.client_cert_pem.empty())
    return Error("its status has neither a token nor clientCertificateData and clientKeyData");
  if (!expiry->empty()) {
    c.expires = parse_rfc3339(*expiry);
    if (!c.expires)
      return Error("its status.expirationTimestamp \"" + *expiry + "\" is not an RFC 3339 time");
  }
  return c;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
      s[16] != ':')
    return std::nullopt;
  std::tm tm{};
  const int year = digits(s, 0, 4), mon = digits(s, 5, 2), day = digits(s, 8, 2);
  const int hour = digits(s, 11, 2), min = digits(s, 14, 2), sec = digits(s, 17, 2);
  // Years the clock's nanosecond count can hold (1678-2261): a time outside them would overflow it.
  if (year < 1700 || year > 2200 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
      min < 0 || min > 59 || sec < 0 || sec > 60)
    return std::nullopt;
  size_t pos = 19;
  std::chrono::nanoseconds frac{0};
  if (s[pos] == '.') {
    ++pos;
    const size_t start = pos;
    int64_t ns = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (pos - start < 9) ns = ns * 10 + (s[pos] - '0');
      ++pos;
    }
    if (pos == start) return std::nullopt;
    for (size_t n = std::min<size_t>(pos - start, 9); n < 9; ++n) ns *= 10;
    frac = std::chrono::nanoseconds(ns);
  }
  int offset_minutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int oh = digits(s, pos + 1, 2), om = digits(s, pos + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || pos + 3 >= s.size() || s[pos + 3] != ':')
      return std::nullopt;
    offset_minutes = (s[pos] == '-' ? -1 : 1) * (oh * 60 + om);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm);
  return std::chrono::system_clock::from_time_t(t) - std::chrono::minutes(offset_minutes) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(frac);
}

Result<ExecCredential> parse_exec_credential(std::string_view text, const std::string& api_version) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error("its output is not a JSON object (an ExecCredential)");
  auto kind = string_field(j, "kind", "the output");
  if (!kind) return kind.error();
  if (*kind != "ExecCredential")
    return Error("its output is of kind \"" + *kind + "\", not an ExecCredential");
  auto version = string_field(j, "apiVersion", "the output");
  if (!version) return version.error();
  if (*version != api_version) {
    return Error("it returned an ExecCredential of apiVersion \"" + *version +
                 "\", but the kubeconfig asks for " + api_version);
  }
  const auto status = j.find("status");
  if (status == j.end() || status->is_null()) return Error("its ExecCredential has no status");
  if (!status->is_object()) return Error("its ExecCredential's status is not an object");
  return read_status(*status);
}

Result<std::string> exec_info(const Config& config) {
  const ExecConfig& ec = *config.exec;
  Json info = {
      {"apiVersion", ec.api_version}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}};
  if (!ec.provide_cluster_info) return info.dump();
  Json cluster = {{"server", config.server}};
  if (!config.tls_server_name.empty()) cluster["tls-server-name"] = config.tls_server_name;
  if (config.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
  std::string ca = config.ca_data;
  if (ca.empty() && !config.ca_file.empty()) {
    std::ifstream in(config.ca_file, std::ios::binary);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    if (!in || in.bad())
      return Error("cannot read the certificate authority " + config.ca_file + ": " + std::strerror(errno));
    ca = text.str();
  }
  if (!ca.empty()) {
    cluster["certificate-authority-data"] =
        YAML::EncodeBase64(reinterpret_cast<const unsigned char*>(ca.data()),  // NOLINT: bytes of the PEM
                           ca.size());
  }
  if (!ec.cluster_config.empty()) {
    Json extension = Json::parse(ec.cluster_config, nullptr, /*allow_exceptions=*/false);
    if (!extension.is_discarded()) cluster["config"] = std::move(extension);
  }
  info["spec"]["cluster"] = std::move(cluster);
  return info.dump();
}

}  // namespace dm::kube
