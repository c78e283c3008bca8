#!/usr/bin/env bash
# The arm64 image of the multi-arch archive (scripts/image), on this x86-64 machine: a container made from the
# archive for linux/arm64 (as a Grace node pulls it), its files checked to be arm64 programs, then the commands
# the operator runs in it, in a chroot of its root filesystem under qemu-aarch64-static (no binfmt_misc here: the
# emulator is copied into the tree and named in each command; it loads the image's own loader and libc).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/image/lib.sh
. "$SRC/tests/image/lib.sh"

build_image
command -v qemu-aarch64-static >/dev/null || die "qemu-aarch64-static is not installed (scripts/install-deps)"
command -v aarch64-linux-gnu-readelf >/dev/null || die "aarch64-linux-gnu-readelf is not installed (scripts/install-deps)"
CTR=$(bah from --quiet --arch arm64 --os linux "oci-archive:$ARCHIVE") || die "buildah from --arch arm64 failed"
trap 'cleanup' EXIT
root=$(bah mount "$CTR") || die "buildah mount $CTR failed"
cleanup_hooks+=("bah umount '$CTR' >/dev/null 2>&1 || true")

check_eq "the container made for linux/arm64 has the arm64 configuration" "linux arm64" \
  "$(bah inspect --type container "$CTR" | jq -r '.OCIv1 | "\(.os) \(.architecture)"')"

# --- every program and library is arm64 -------------------------------------------------------------------
machine() { aarch64-linux-gnu-readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p'; }
for f in /usr/bin/driver-manager /usr/bin/vfio-manage /usr/bin/busybox \
  $(cd "$root" && find usr/lib -name '*.so*' -type f | sed 's#^#/#'); do
  check_eq "$f is an AArch64 ELF file" AArch64 "$(machine "$root$f")"
done
check_eq "driver-manager's loader is the image's" "/lib/ld-linux-aarch64.so.1" \
  "$(aarch64-linux-gnu-readelf -l "$root/usr/bin/driver-manager" | sed -n 's/.*interpreter: \(.*\)]$/\1/p')"

# --- the operator's commands, in a chroot of the image under qemu -----------------------------------------
emu=/.dm-qemu-aarch64-static
install -m 0755 "$(command -v qemu-aarch64-static)" "$root$emu"
cleanup_hooks+=("rm -f '$root$emu'")
in_chroot() {  # CMD...: runs CMD (an arm64 program of the image) with the image as root; OUT, RC
  OUT=$(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$root" "$emu" "$@" 2>&1)
  RC=$?
}

version=$(sed -n 's/^project(driver-manager VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
upstream=$(sed -n 's/^set(DM_UPSTREAM_VERSION \(v[0-9.]*\))/\1/p' "$SRC/CMakeLists.txt")
commit=$(git -C "$SRC" rev-parse --short HEAD)
in_chroot /usr/bin/driver-manager --version
check_eq "driver-manager --version prints the version and commit" \
  "0 driver-manager version $version (commit $commit), tracks k8s-driver-manager $upstream" "$RC $OUT"
in_chroot /usr/bin/driver-manager uninstall_driver
check_eq "driver-manager uninstall_driver without NODE_NAME exits 1" 1 "$RC"
check_has "... and names the missing flag" 'Required flag "node-name" not set' "$OUT"
in_chroot /usr/bin/vfio-manage --help
check_has "vfio-manage --help shows bind and unbind" "unbind" "$RC $OUT"

# sh -c true, and a shell that really interprets: arithmetic, PATH lookup of the applets and both programs.
in_chroot /bin/sh -c true
check_eq "sh -c true" "0 " "$RC $OUT"
in_chroot /bin/sh -c 'echo $((6 * 7)); which sh sleep chroot driver-manager vfio-manage'
check_eq "sh computes and finds sh, sleep, chroot and both programs on PATH" \
  "0 42 /usr/bin/sh /usr/bin/sleep /usr/bin/chroot /usr/bin/driver-manager /usr/bin/vfio-manage" \
  "$RC $(tr '\n' ' ' <<<"$OUT" | sed 's/ $//')"
# chroot (busybox, arm64) changes root and runs a program there: `/` is the image itself, then a directory
# holding only a marker, busybox and the emulator, whose marker is visible as /marker only inside.
in_chroot /usr/bin/chroot / "$emu" /usr/bin/driver-manager --version
check_eq "chroot / driver-manager --version" "0 driver-manager version $version (commit $commit), tracks k8s-driver-manager $upstream" "$RC $OUT"
inner=/tmp/dm-inner-root
mkdir -p "$root$inner"
cleanup_hooks+=("rm -rf '$root$inner'")
echo inner-root >"$root$inner/marker"
install -m 0755 "$root/usr/bin/busybox" "$root$inner/busybox"
install -m 0755 "$root$emu" "$root$inner$emu"
in_chroot /usr/bin/chroot "$inner" "$emu" /busybox cat /marker
check_eq "chroot DIR runs its program with DIR as /" "0 inner-root" "$RC $OUT"
in_chroot /usr/bin/busybox cat /marker
check_eq "... and /marker is not in the image itself" 1 "$RC"
finish
