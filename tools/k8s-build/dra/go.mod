// The pinned DRA driver of the real node that scripts/cluster build compiles: kubernetes-sigs' example driver's
// kubelet plugin (simulated GPUs published as ResourceSlices and handed to containers through CDI), which the
// e2e tests start under the driver name gpu.nvidia.com.
module driver-manager/dra-build

go 1.26.0

require sigs.k8s.io/dra-example-driver v0.4.0
