#include "kube/errors.h"

#include <nlohmann/json.hpp>
#include <string>

namespace dm::kube {

Error api_error(std::string_view method, std::string_view path, long http_status, std::string_view body) {
  std::string message;
  std::string reason;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.value("kind", "") == "Status") {
    if (j.contains("message") && j["message"].is_string()) message = j["message"].get<std::string>();
    if (j.contains("reason") && j["reason"].is_string()) reason = j["reason"].get<std::string>();
    // Causes carry the specifics, e.g. which PodDisruptionBudget blocks an eviction.
    const auto* causes = j.contains("details") && j["details"].is_object() && j["details"].contains("causes")
                             ? &j["details"]["causes"]
                             : nullptr;
    if (causes != nullptr && causes->is_array()) {
      std::string extra;
      for (const auto& c : *causes) {
        if (!c.is_object() || !c.contains("message") || !c["message"].is_string()) continue;
        const std::string m = c["message"].get<std::string>();
        if (m.empty() || message.find(m) != std::string::npos) continue;
        if (!extra.empty()) extra += "; ";
        extra += m;
      }
      if (!extra.empty()) message += (message.empty() ? "" : ": ") + extra;
    }
  } else {
    std::string b(body.substr(0, 200));
    while (!b.empty() && (b.back() == '\n' || b.back() == '\r' || b.back() == ' ')) b.pop_back();
    message =
        b.empty() ? "empty response" : "unexpected response \"" + b + (body.size() > 200 ? "...\"" : "\"");
  }
  if (message.empty()) message = "request failed";
  std::string status = std::to_string(http_status);
  if (!reason.empty()) status += " " + reason;
  return Error(std::string(method) + " " + std::string(path) + ": " + message + " (" + status + ")",
               static_cast<int>(http_status), reason);
}

Error transport_error(std::string_view method, std::string_view path, std::string_view server,
                      std::string_view detail) {
  return Error(std::string(method) + " " + std::string(path) + ": request to the API server " +
               std::string(server) + " failed: " + std::string(detail));
}

}  // namespace dm::kube
