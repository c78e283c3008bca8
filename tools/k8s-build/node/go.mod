// The pinned container runtime of the test node that scripts/node build compiles: containerd 2 (its daemon,
// ctr and the runc v2 shim) and runc.
module driver-manager/node-build

go 1.26.6

require (
	github.com/containerd/containerd/v2 v2.4.2
	github.com/opencontainers/runc v1.5.3
)
