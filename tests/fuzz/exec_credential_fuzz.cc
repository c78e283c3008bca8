// The standard output of an exec credential plugin (kube/exec_credential: an ExecCredential as JSON, its
// status, an RFC 3339 expirationTimestamp).
#include "fuzz_support.h"
#include "kube/exec_credential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = dm::fuzz::text(data, size);
  (void)dm::kube::parse_exec_credential(input, "client.authentication.k8s.io/v1");
  (void)dm::kube::parse_exec_credential(input, "client.authentication.k8s.io/v1beta1");
  (void)dm::kube::parse_rfc3339(input);
  return 0;
}
