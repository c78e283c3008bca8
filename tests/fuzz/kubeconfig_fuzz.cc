// A kubeconfig file (kube/config: YAML, contexts, clusters, users, base64 certificate data).
#include <cstdlib>

#include "fuzz_support.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dm::fuzz::scratch_dir() + "/kubeconfig";
  dm::fuzz::write_file(path, dm::fuzz::text(data, size));
  (void)dm::kube::load_kubeconfig(path);
  (void)dm::kube::load_kubeconfig(path, "gpu-cluster");
  return 0;
}
