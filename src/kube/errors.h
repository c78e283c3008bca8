// Turning failed API requests into dm::Error values an operator can act on.
#pragma once

#include <string_view>

#include "common/result.h"

namespace dm::kube {

// The error of a non-2xx response: "<METHOD> <path>: <Status.message>[: <causes>] (<code> <Status.reason>)",
// e.g. `GET /api/v1/nodes/x: nodes "x" not found (404 NotFound)`. Non-Status bodies are quoted (shortened).
Error api_error(std::string_view method, std::string_view path, long http_status, std::string_view body);

// The error of a request that got no usable response (connection refused, TLS failure, timeout, ...).
Error transport_error(std::string_view method, std::string_view path, std::string_view server,
                      std::string_view detail);

}  // namespace dm::kube
