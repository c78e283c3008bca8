#!/usr/bin/env bash
# Builds the stand-in images for the GPU Operator's operands and writes one OCI archive per image name.
#
# Usage: tests/operator/standin-images.sh OUT_DIR NAME...
#
# One image, built with buildah (vfs storage) from scratch: busybox-static with its applet links, and the
# stand-in programs of tests/fixtures/operator/standin/ in /usr/bin (the driver container's `nvidia-driver`,
# `nvidia-smi`, the validator's `nvidia-validator`, `config-manager`, `standin-serve` and the commands of the
# images that the operator runs without a command (`nv-hostengine`, `dcgm-exporter`), `sleep-forever` and
# its links for the operands that only have to run (`nvidia-toolkit`, `gpu-feature-discovery`,
# `nvidia-mig-manager`)), and `nvidia-device-plugin`, built here from the Go module tests/operator/
# device-plugin (CGO_ENABLED=0, -mod=readonly against its go.sum, caches in $K8S_GO_CACHE, default
# /var/cache/driver-manager-go). Each NAME (the operator's own image names, e.g.
# nvcr.io/nvidia/driver:595.91.07-ubuntu22.04) gets OUT_DIR/<n>.tar; NAME@PROGRAM makes PROGRAM the image's
# command (default `sleep-forever`); operator=NAME adds the operator (STANDIN_OPERATOR). scripts/node imports
# them (NODE_IMAGES). Prints the archives, one a line. The archives are reused while the stand-in programs,
# the device plugin's module, Go and the names are unchanged (a stamp in OUT_DIR).
set -Eeuo pipefail
out="$1"; shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
src="$here/../fixtures/operator/standin"
plugin="$here/device-plugin"
go=$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)
[[ -x $go ]] || { echo "standin-images: no go (the device plugin stand-in is built with it)" >&2; exit 1; }
[[ $EUID -eq 0 ]] || { echo "standin-images: needs root (buildah, vfs storage)" >&2; exit 1; }
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
operator=${STANDIN_OPERATOR:-}
if [[ " $* " == *" operator="* ]]; then
  [[ -x $operator/gpu-operator && -d $operator/opt ]] ||
    { echo "standin-images: operator=NAME needs STANDIN_OPERATOR, a directory with gpu-operator and opt/" >&2; exit 1; }
fi
stamp=$( (cat "$src"/* "$plugin"/go.mod "$plugin"/go.sum "$plugin"/*.go "${BASH_SOURCE[0]}" /bin/busybox
  "$go" version; printf '%s\n' "$@"
  if [[ -n $operator ]]; then cat "$operator/gpu-operator"; find "$operator/opt" -type f | sort | xargs cat; fi) |
  sha256sum | cut -d' ' -f1)
if [[ "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp" ]]; then
  for i in $(seq 1 $#); do printf '%s\n' "$out/$i.tar"; done
  exit 0
fi
rm -f "$out"/*.tar "$out/.stamp"
bah() { buildah --storage-driver vfs "$@"; }
export BUILDAH_ISOLATION=chroot
root=$(mktemp -d)
trap 'rm -rf "$root"; [[ -z "${ctr:-}" ]] || bah rm "$ctr" >/dev/null 2>&1 || true' EXIT
mkdir -p "$root/bin" "$root/usr/bin" "$root/tmp" "$root/run" "$root/sys" "$root/proc" "$root/dev"
cp /bin/busybox "$root/bin/busybox"
for a in $(/bin/busybox --list); do [[ "$a" == busybox ]] || ln -s busybox "$root/bin/$a"; done
cp "$src"/* "$root/usr/bin/"
for p in nvidia-toolkit gpu-feature-discovery nvidia-mig-manager; do ln -s sleep-forever "$root/usr/bin/$p"; done
(cd "$plugin" && GOMODCACHE="${K8S_GO_CACHE:-/var/cache/driver-manager-go}/mod" \
  GOCACHE="${K8S_GO_CACHE:-/var/cache/driver-manager-go}/build" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
  CGO_ENABLED=0 "$go" build -mod=readonly -trimpath -ldflags "-s -w" -o "$root/usr/bin/nvidia-device-plugin" .) ||
  { echo "standin-images: cannot build the device plugin stand-in ($plugin)" >&2; exit 1; }
ctr=$(bah from scratch)
bah copy "$ctr" "$root/" / >/dev/null
bah config --env PATH=/usr/bin:/bin --cmd /usr/bin/sleep-forever "$ctr"
base="localhost/operator-standin:build-$$"
bah commit --quiet "$ctr" "$base" >/dev/null
i=0
for arg in "$@"; do
  i=$((i + 1))
  name=${arg#operator=}
  cmd=
  if [[ $name == *@* ]]; then cmd=${name##*@}; name=${name%@*}; fi
  if [[ $arg == operator=* ]]; then
    octr=$(bah from "$base")
    bah copy "$octr" "$operator/gpu-operator" /usr/bin/gpu-operator >/dev/null
    bah copy "$octr" "$operator/opt" /opt/gpu-operator >/dev/null
    bah commit --quiet "$octr" "$name" >/dev/null
    bah rm "$octr" >/dev/null
  elif [[ -n $cmd ]]; then
    octr=$(bah from "$base")
    bah config --cmd "/usr/bin/$cmd" "$octr"
    bah commit --quiet "$octr" "$name" >/dev/null
    bah rm "$octr" >/dev/null
  else
    bah tag "$base" "$name"
  fi
  bah push --quiet "$name" "oci-archive:$out/$i.tar:$name" >/dev/null
  bah rmi "$name" >/dev/null
  printf '%s\n' "$out/$i.tar"
done
bah rmi "$base" >/dev/null || true
printf '%s' "$stamp" > "$out/.stamp"
