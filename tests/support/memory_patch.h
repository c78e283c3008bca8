// The patch types of the in-memory cluster (memory_cluster.h): merge patch (RFC 7386), strategic merge patch
// as the API server applies it to the objects the flow patches (lists merged by their merge keys), and
// JSON patch (RFC 6902: add, remove, replace, test).
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "kube/api.h"

namespace dm::test {

// `current` with `patch` applied; an error when the patch does not apply (a failed test operation, a path
// that does not exist).
Result<nlohmann::json> apply_patch(const nlohmann::json& current, kube::PatchType type,
                                   const nlohmann::json& patch);

}  // namespace dm::test
