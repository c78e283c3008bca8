// A pod's service account as the in-cluster configuration reads it (kube/config, kube/token_source): the
// token, namespace and CA files and KUBERNETES_SERVICE_HOST/PORT, given as the parts of the input between
// "\n---\n" lines (token, namespace, host, port); then the token file rotated to the same bytes.
#include <cstdlib>

#include "common/clock.h"
#include "fuzz_support.h"
#include "kube/config.h"
#include "kube/token_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = dm::fuzz::split(dm::fuzz::text(data, size), "\n---\n");
  const auto part = [&](size_t i) { return i < parts.size() ? std::string(parts[i]) : std::string(); };
  const std::string& dir = dm::fuzz::scratch_dir();
  dm::fuzz::write_file(dir + "/token", part(0));
  dm::fuzz::write_file(dir + "/namespace", part(1));
  dm::fuzz::write_file(dir + "/ca.crt", "");
  // setenv() cannot take a value with a NUL byte: it ends the value there, as it would in a real environment.
  setenv("KUBERNETES_SERVICE_HOST", part(2).c_str(), 1);  // NOLINT(concurrency-mt-unsafe): one thread
  setenv("KUBERNETES_SERVICE_PORT", part(3).c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  auto config = dm::kube::in_cluster_config(dir);
  if (!config) return 0;
  if (config->token.empty()) dm::fuzz::fail("an empty token was accepted");
  const dm::SystemClock clock;
  dm::kube::TokenSource tokens(*config, clock, std::chrono::milliseconds(0));
  auto first = tokens.current();
  if (!first) dm::fuzz::fail("a token file's source has no error to give: " + first.error().message);
  (void)tokens.renew_after_unauthorized(*first);
  return 0;
}
