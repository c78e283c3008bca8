// The pinned Helm that the operator tier installs the GPU Operator's chart with, as the README tells users to
// (scripts/cluster build helm).
module driver-manager/helm-build

go 1.26.0

require helm.sh/helm/v4 v4.3.2
