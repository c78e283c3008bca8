// The device plugin stand-in of the operator tier (tests/operator/standin-images.sh builds it into the
// stand-in image as nvidia-device-plugin). k8s.io/kubelet and google.golang.org/grpc at the releases the
// pinned Kubernetes (tools/k8s-build/kubernetes) uses, so the module cache already holds them.
module driver-manager/operator-device-plugin

go 1.26.0

require (
	google.golang.org/grpc v1.82.1
	k8s.io/kubelet v0.37.2
)
