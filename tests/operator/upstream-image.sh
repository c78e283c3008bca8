#!/usr/bin/env bash
# Builds upstream's k8s-driver-manager image for the operator tier and bench/operator-upgrade, and writes one
# OCI archive per image name.
#
# Usage: tests/operator/upstream-image.sh PROGRAM_XZ OUT_DIR NAME...
#
# The image has the layout of NVIDIA's (busybox for sh and the rest, the program at /usr/bin/driver-manager):
# PROGRAM_XZ (upstream's driver-manager, xz-compressed) at /usr/bin/driver-manager.upstream behind
# tests/operator/upstream-entry, which shows it the test node's simulated host and answers its delete_module
# calls with bench/sim-modules (in the image at /usr/bin/sim-modules); a vfio-manage stand-in (the simulated
# node has no PCI devices). Built with buildah (vfs storage) from scratch. Each NAME (e.g. the chart's own
# nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0) gets OUT_DIR/<n>.tar, which scripts/node imports
# (NODE_IMAGES). Prints the archives, one a line; reused while the inputs and the names are unchanged (a
# stamp in OUT_DIR).
set -Eeuo pipefail
xz_file=$1 out=$2
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
src="$here/../.."
[[ $EUID -eq 0 ]] || { echo "upstream-image: needs root (buildah, vfs storage)" >&2; exit 1; }
[[ -f $xz_file ]] || { echo "upstream-image: no $xz_file" >&2; exit 1; }
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp=$( (cat "$xz_file" "$here/upstream-entry" "$src/bench/sim-modules" "${BASH_SOURCE[0]}" /bin/busybox
  printf '%s\n' "$@") | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp" ]]; then
  for i in $(seq 1 $#); do printf '%s\n' "$out/$i.tar"; done
  exit 0
fi
rm -f "$out"/*.tar "$out/.stamp"
bah() { buildah --storage-driver vfs "$@"; }
export BUILDAH_ISOLATION=chroot
root=$(mktemp -d)
trap 'rm -rf "$root"; [[ -z "${ctr:-}" ]] || bah rm "$ctr" >/dev/null 2>&1 || true' EXIT
mkdir -p "$root/bin" "$root/usr/bin" "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
for a in $(/bin/busybox --list); do [[ $a == busybox ]] || ln -s busybox "$root/bin/$a"; done
xz -dc "$xz_file" >"$root/usr/bin/driver-manager.upstream"
chmod +x "$root/usr/bin/driver-manager.upstream"
cp "$here/upstream-entry" "$root/usr/bin/driver-manager"
cp "$src/bench/sim-modules" "$root/usr/bin/sim-modules"
# Upstream's image ships its vfio-manage, which the program runs after the unload; the simulated node has no
# PCI devices, so a stand-in that says so does what it would (bench/run --peers gives the peers ours).
printf '#!/bin/sh\necho "vfio-manage (stand-in): no NVIDIA devices on the simulated node"\n' >"$root/usr/bin/vfio-manage"
chmod +x "$root/usr/bin/vfio-manage"
ctr=$(bah from scratch)
bah copy "$ctr" "$root/" / >/dev/null
bah config --env PATH=/usr/bin:/bin "$ctr"
base="localhost/upstream-driver-manager:build-$$"
bah commit --quiet "$ctr" "$base" >/dev/null
i=0
for name in "$@"; do
  i=$((i + 1))
  bah tag "$base" "$name"
  bah push --quiet "$name" "oci-archive:$out/$i.tar:$name" >/dev/null
  bah rmi "$name" >/dev/null
  printf '%s\n' "$out/$i.tar"
done
bah rmi "$base" >/dev/null || true
printf '%s' "$stamp" >"$out/.stamp"
