// Turning failed API requests into dm::Error values an operator can act on (message) and code can classify
// (HTTP status, Status reason, Status causes).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dm::kube {

// The fields of a metav1.Status object (a failed response's body, or the object of a watch ERROR event).
struct StatusFields {
  int code = 0;
  std::string message;
  std::string reason;
  std::vector<StatusCause> causes;
};
// nullopt when `j` is not a Status object.
std::optional<StatusFields> parse_status(const nlohmann::json& j);

// The error of a non-2xx response: "<METHOD> <path>: <Status.message>[: <causes>] (<code> <Status.reason>)",
// e.g. `GET /api/v1/nodes/x: nodes "x" not found (404 NotFound)`. Non-Status bodies are quoted (shortened).
// The Status reason and causes are kept in the Error.
Error api_error(std::string_view method, std::string_view path, long http_status, std::string_view body);

// The error of a request that got no usable response (connection refused, TLS failure, timeout, ...).
Error transport_error(std::string_view method, std::string_view path, std::string_view server,
                      std::string_view detail);

}  // namespace dm::kube
