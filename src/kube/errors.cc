#include "kube/errors.h"

#include <optional>
#include <string>

namespace dm::kube {
namespace {

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::optional<StatusFields> parse_status(const nlohmann::json& j) {
  if (!j.is_object() || string_field(j, "kind") != "Status") return std::nullopt;
  StatusFields st;
  if (const auto code = j.find("code"); code != j.end() && code->is_number_integer())
    st.code = code->get<int>();
  st.message = string_field(j, "message");
  st.reason = string_field(j, "reason");
  const auto details = j.find("details");
  if (details == j.end() || !details->is_object()) return st;
  const auto causes = details->find("causes");
  if (causes == details->end() || !causes->is_array()) return st;
  for (const auto& c : *causes) {
    if (!c.is_object()) continue;
    st.causes.push_back({string_field(c, "reason"), string_field(c, "message"), string_field(c, "field")});
  }
  return st;
}

Error api_error(std::string_view method, std::string_view path, long http_status, std::string_view body) {
  std::string message;
  std::string reason;
  std::vector<StatusCause> causes;
  if (auto st = parse_status(nlohmann::json::parse(body, nullptr, false))) {
    message = std::move(st->message);
    reason = std::move(st->reason);
    causes = std::move(st->causes);
    // Causes carry the specifics, e.g. which PodDisruptionBudget blocks an eviction.
    std::string extra;
    for (const auto& c : causes) {
      if (c.message.empty() || message.find(c.message) != std::string::npos) continue;
      if (!extra.empty()) extra += "; ";
      extra += c.message;
    }
    if (!extra.empty()) message += (message.empty() ? "" : ": ") + extra;
  } else {
    std::string b(body.substr(0, 200));
    while (!b.empty() && (b.back() == '\n' || b.back() == '\r' || b.back() == ' ')) b.pop_back();
    message =
        b.empty() ? "empty response" : "unexpected response \"" + b + (body.size() > 200 ? "...\"" : "\"");
  }
  if (message.empty()) message = "request failed";
  std::string status = std::to_string(http_status);
  if (!reason.empty()) status += " " + reason;
  Error e(std::string(method) + " " + std::string(path) + ": " + message + " (" + status + ")",
          static_cast<int>(http_status), reason);
  e.causes = std::move(causes);
  return e;
}

Error transport_error(std::string_view method, std::string_view path, std::string_view server,
                      std::string_view detail) {
  return Error(std::string(method) + " " + std::string(path) + ": request to the API server " +
               std::string(server) + " failed: " + std::string(detail));
}

}  // namespace dm::kube
