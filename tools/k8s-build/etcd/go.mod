// The pinned etcd (and etcdctl) that scripts/cluster build compiles. go.etcd.io/etcd/server/v3 points its sibling
// modules at local paths, which only etcd's own tree has: this module pins each one to the published tag.
module driver-manager/etcd-build

go 1.26.0

require (
	go.etcd.io/etcd/api/v3 v3.6.17
	go.etcd.io/etcd/client/pkg/v3 v3.6.17
	go.etcd.io/etcd/client/v3 v3.6.17
	go.etcd.io/etcd/etcdctl/v3 v3.6.17
	go.etcd.io/etcd/pkg/v3 v3.6.17
	go.etcd.io/etcd/server/v3 v3.6.17
)

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.6.17
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v3.6.17
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v3.6.17
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v3.6.17
)
