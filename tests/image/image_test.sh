#!/usr/bin/env bash
# The container image, built with scripts/image and checked from inside (buildah run, chroot isolation, on a
# container made from the OCI archive itself) the way the GPU Operator runs it: the init container's
# `driver-manager` command, the vfio-manager's shell command and preStop hook, the tools they need; then its
# file list against tests/fixtures/image/manifest.txt and its configuration against the Containerfile. The
# archive holds the arm64 image too: its platforms and the arm64 file list (manifest-arm64.txt) are checked
# here, its commands by image_arm64_test.sh.
#
# UPDATE_MANIFEST=1 rewrites the manifests from the images instead of comparing (review the diff).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/image/lib.sh
. "$SRC/tests/image/lib.sh"
MANIFESTS=$SRC/tests/fixtures/image
TAG=${DM_IMAGE_TAG:-localhost/driver-manager:dev}

build_image
container_from_archive
work=$(mktemp -d /tmp/dm-image-test.XXXXXX)
cleanup_hooks+=("rm -rf '$work'")

# --- the archive -----------------------------------------------------------------------------------------
index=$(tar -xOf "$ARCHIVE" index.json) || die "$ARCHIVE has no index.json"
check_eq "the archive's index.json names the image" "$TAG" \
  "$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' <<<"$index")"
check_eq "... as an image index of two images (multi-arch)" "application/vnd.oci.image.index.v1+json 2" \
  "$(jq -r '.manifests[0].mediaType' <<<"$index") $(image_index | jq '.manifests | length')"
check_eq "... for linux/amd64 and linux/arm64" "linux/amd64 linux/arm64" \
  "$(image_index | jq -r '[.manifests[].platform | "\(.os)/\(.architecture)"] | sort | join(" ")')"
for arch in amd64 arm64; do
  check_eq "the $arch image's configuration says linux/$arch" "linux $arch" \
    "$(image_config "$arch" | jq -r '"\(.os) \(.architecture)"')"
done
config=$(bah inspect --type container "$CTR" | jq '.OCIv1.config')

# --- driver-manager, as the operator's init container runs it --------------------------------------------
version=$(sed -n 's/^project(driver-manager VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
upstream=$(sed -n 's/^set(DM_UPSTREAM_VERSION \(v[0-9.]*\))/\1/p' "$SRC/CMakeLists.txt")
commit=$(git -C "$SRC" rev-parse --short HEAD)
in_image -- driver-manager --version
out=$OUT
check_eq "driver-manager --version prints the version and commit" \
  "0 driver-manager version $version (commit $commit), tracks k8s-driver-manager $upstream" "$RC $out"
check_eq "label org.opencontainers.image.version" "$version" \
  "$(jq -r '.Labels["org.opencontainers.image.version"]' <<<"$config")"
check_eq "label org.opencontainers.image.revision" "$commit" \
  "$(jq -r '.Labels["org.opencontainers.image.revision"]' <<<"$config")"
check_eq "label org.opencontainers.image.title" "driver-manager" \
  "$(jq -r '.Labels["org.opencontainers.image.title"]' <<<"$config")"
check_eq "label org.opencontainers.image.licenses" "Apache-2.0" \
  "$(jq -r '.Labels["org.opencontainers.image.licenses"]' <<<"$config")"
check_eq "label org.opencontainers.image.source is set (empty without DM_IMAGE_SOURCE or an origin remote)" \
  "true" "$(jq -r '.Labels | has("org.opencontainers.image.source")' <<<"$config")"

# As in a pod, where the operator always sets NODE_NAME (required flags are checked before the sub-command).
in_image --env NODE_NAME=node-1 -- driver-manager help
out=$OUT
check_eq "driver-manager help exits 0" 0 "$RC"
check_has "driver-manager help lists uninstall_driver" "uninstall_driver" "$out"
check_has "driver-manager help lists preflight_check" "preflight_check" "$out"

# The operator's init container: command [driver-manager], args [uninstall_driver]. Without NODE_NAME it
# must get as far as the flag check (the binary, its libraries and PATH all work) and refuse.
in_image -- driver-manager uninstall_driver
out=$OUT
check_eq "driver-manager uninstall_driver without NODE_NAME exits 1" 1 "$RC"
check_has "... and names the missing flag" 'Required flag "node-name" not set' "$out"

# --- the tools the operator's commands use -----------------------------------------------------------------
in_image -- vfio-manage --help
out=$OUT
check_eq "vfio-manage --help exits 0" 0 "$RC"
check_has "vfio-manage --help shows bind" "bind" "$out"
check_has "vfio-manage --help shows unbind" "unbind" "$out"

in_image -- /bin/sh -c 'which sh sleep chroot driver-manager vfio-manage'
out=$OUT
check_eq "sh, sleep, chroot and both binaries are on PATH" \
  "0 /usr/bin/sh /usr/bin/sleep /usr/bin/chroot /usr/bin/driver-manager /usr/bin/vfio-manage" \
  "$RC $(tr '\n' ' ' <<<"$out" | sed 's/ $//')"
# driver-manager and vfio-manage run `chroot /host ...`: chroot must really change root.
in_image -- chroot / driver-manager --version
out=$OUT
check_eq "chroot / driver-manager --version" "0 driver-manager version $version (commit $commit), tracks k8s-driver-manager $upstream" "$RC $out"

# --- the vfio-manager DaemonSet: its main container's shell command, then its preStop hook -----------------
# The command never ends by design: it has worked when vfio-manage exited 0 and the shell went on to sleep,
# i.e. a `sleep` process runs below it. Against a simulated PCI tree (DRIVER_MANAGER_SIM_ROOT), mounted at the
# same path so its absolute driver links resolve.
override() { tr -d '\n' <"$1/sys/bus/pci/devices/$2/driver_override"; }
vfio_manager_command() {  # NAME COMMAND
  local name=$1 cmd=$2 sim log pid i running='' comms
  sim=$work/sim-$((++vfio_runs))
  log=$work/vfio-$vfio_runs.log
  sh "$SRC/tests/fixtures/host/fake-pci-tree.sh" "$sim"
  in_image_bg "$log" -v "$sim:$sim" --env DRIVER_MANAGER_SIM_ROOT="$sim" --env HOST_ROOT=/host -- "$cmd"
  pid=$BG_PID
  for ((i = 0; i < 1200; i++)); do  # at most 2 minutes: a safety net, not a speed check
    comms=$(descendants "$pid" | cut -d' ' -f2)
    if grep -qx sleep <<<"$comms"; then running=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -n $running ]]; then
    pass "$name: vfio-manage exited 0 and the shell sleeps"
  else
    fail "$name: vfio-manage exited 0 and the shell sleeps" "output: $(cat "$log" "$log.relay")"
  fi
  check_eq "$name: GPUs and the VGA GPU's audio function bound to vfio-pci" "vfio-pci vfio-pci vfio-pci" \
    "$(override "$sim" 0000:3b:00.0) $(override "$sim" 0000:86:00.0) $(override "$sim" 0000:86:00.1)"
  check_eq "$name: the NVSwitch and the non-NVIDIA device untouched" "[] []" \
    "[$(override "$sim" 0000:c1:00.0)] [$(override "$sim" 0000:04:00.0)]"
  check_has "$name: logs the binding" "Binding device 0000:3b:00.0 to driver: vfio-pci" "$(cat "$log")"
  stop_tree "$pid"
  if [[ -z $(descendants "$pid") ]] && ! kill -0 "$pid" 2>/dev/null; then
    pass "$name: stopped"
  else
    fail "$name: stopped" "still running: $(descendants "$pid" | tr '\n' ' ')"
  fi
  VFIO_SIM=$sim
}
vfio_runs=0
vfio_manager_command "vfio-manager 'sleep inf'" 'vfio-manage bind --all && sleep inf'
vfio_manager_command "vfio-manager (stock operator)" \
  'vfio-manage bind --all && while true; do sleep 86400; done'

# preStop: /bin/sh -c "vfio-manage unbind --all" on the tree the last run bound.
in_image -v "$VFIO_SIM:$VFIO_SIM" --env DRIVER_MANAGER_SIM_ROOT="$VFIO_SIM" -- \
  /bin/sh -c "vfio-manage unbind --all"
out=$OUT
check_eq "preStop 'vfio-manage unbind --all' exits 0" 0 "$RC"
check_eq "preStop clears the driver overrides" "[] [] []" \
  "[$(override "$VFIO_SIM" 0000:3b:00.0)] [$(override "$VFIO_SIM" 0000:86:00.0)] [$(override "$VFIO_SIM" 0000:86:00.1)]"

# --- what ships: NOTICE and third-party.tsv name every library and program of the image ----------------------
for arch in amd64 arm64; do
  listing=$(image_listing "$arch")
  notice=$(image_file "$arch" /usr/share/doc/driver-manager/NOTICE)
  tsv=$(image_file "$arch" /usr/share/doc/driver-manager/third-party.tsv)
  check_has "$arch NOTICE names driver-manager, its version, commit and licence" \
    "driver-manager $version (commit $commit), linux/$arch"$'\n'"Licensed under the Apache License, Version 2.0" \
    "$notice"
  check_eq "$arch LICENSE is the repository's" "$(cat "$SRC/LICENSE")" \
    "$(image_file "$arch" /usr/share/doc/driver-manager/LICENSE)"
  # Every shared library, the loader and busybox: listed with its package, and that package's copyright file
  # ships too.
  files=$(awk '$1 !~ /^[dl]/ && ($3 ~ /\.so(\.[0-9]+)*$/ || $3 ~ /\/ld-linux/ || $3 == "/usr/bin/busybox") { print $3 }' \
    <<<"$listing")
  missing=()
  for f in $files; do
    pkg=$(awk -F'\t' -v f="$f" 'NR > 1 { n = split($7, a, " "); for (i = 1; i <= n; i++) if (a[i] == f) print $1 }' \
      <<<"$tsv")
    if [[ -z $pkg || $notice != *"files: "*"$f"* ]] || ! grep -q " /usr/share/doc/$pkg/copyright\$" <<<"$listing"; then
      missing+=("$f${pkg:+ ($pkg)}")
    fi
  done
  check_eq "$arch: every library, the loader and busybox are in NOTICE with their package's copyright file" \
    "$(wc -w <<<"$files") listed" "$(($(wc -w <<<"$files") - ${#missing[@]})) listed${missing:+; not: ${missing[*]}}"
  check_eq "$arch: the libraries include OpenSSL and glibc" "2" \
    "$(grep -cE '/(libssl|libc)\.so' <<<"$files")"
  check_has "$arch: busybox (GPL-2) is named with the Debian source package its source is in" \
    "$(printf 'licences: GPL-2\n  source: Debian source package busybox ')" "$notice"
  # Code compiled into the programs: yaml-cpp, spdlog, fmt and the C++ runtime.
  for p in yaml-cpp spdlog fmtlib gcc-12; do
    check_eq "$arch: the linked-in $p is in third-party.tsv" "linked" \
      "$(awk -F'\t' -v s="$p" '$4 == s || $4 == s "-cross" { print $7 }' <<<"$tsv")"
  done
  # Each package's version is the one the build machine's dpkg (or the unpacked arm64 list) records.
  check_eq "$arch: the OpenSSL package's version is the installed one" \
    "$(dpkg-query -W -f='${Version}' "libssl3:$arch")" "$(awk -F'\t' '$1 == "libssl3" { print $2 }' <<<"$tsv")"
done

# --- nothing else of the build machine: each architecture's files against its manifest ---------------------
for arch in amd64 arm64; do
  manifest=$MANIFESTS/manifest.txt
  [[ $arch == amd64 ]] || manifest=$MANIFESTS/manifest-$arch.txt
  listing=$work/listing-$arch.txt
  image_listing "$arch" >"$listing"
  if [[ ${UPDATE_MANIFEST:-} == 1 ]]; then
    mkdir -p "$MANIFESTS" && cp "$listing" "$manifest"
    fail "manifest rewritten (UPDATE_MANIFEST=1): review and commit ${manifest#"$SRC"/}"
  elif diff_out=$(diff -u "$manifest" "$listing"); then
    pass "the $arch image's files are exactly ${manifest#"$SRC"/} ($(wc -l <"$listing") entries)"
  else
    fail "the $arch image's files are exactly ${manifest#"$SRC"/}" \
      "diff (- expected, + image); if the change is intended: UPDATE_MANIFEST=1 $0" "$diff_out"
  fi
done

# --- one recipe: the Containerfile configures the image as scripts/image does -------------------------------
cf=$SRC/Containerfile
check_eq "Containerfile ENTRYPOINT = the image's" "$(jq -c .Entrypoint <<<"$config")" \
  "$(sed -n 's/^ENTRYPOINT //p' "$cf" | jq -c .)"
check_eq "Containerfile PATH = the image's" "$(jq -r '.Env[] | select(startswith("PATH="))' <<<"$config")" \
  "$(sed -n 's/^ENV //p' "$cf")"
check_eq "Containerfile USER and WORKDIR = the image's" "$(jq -r '"\(.User) \(.WorkingDir)"' <<<"$config")" \
  "$(sed -n 's/^USER //p' "$cf") $(sed -n 's/^WORKDIR //p' "$cf" | tail -n 1)"
check_eq "Containerfile default VERSION = the project's" "$version" "$(sed -n 's/^ARG VERSION=//p' "$cf")"
check_eq "Containerfile labels = the image's" "$(jq -r '.Labels | keys[]' <<<"$config" | sort | tr '\n' ' ')" \
  "$(grep -o '^ *\(LABEL \)\{0,1\} *[a-z.]*=' "$cf" | sed 's/LABEL//; s/[ =]//g' | sort | tr '\n' ' ')"
check_has "Containerfile stages with scripts/stage-image-rootfs for the target architecture" \
  './scripts/stage-image-rootfs --arch "${TARGETARCH}" /rootfs' "$(cat "$cf")"
check_has "Containerfile's build stage runs on the build machine's platform" \
  'FROM --platform=${BUILDPLATFORM} ${DEBIAN_IMAGE} AS build' "$(cat "$cf")"
check_has "Containerfile's image is the staged tree on scratch" $'FROM scratch\nCOPY --from=build /rootfs/ /' \
  "$(cat "$cf")"

printf 'image %s: %s unpacked, archive %s bytes\n' "$TAG" "$(bah images --format '{{.Size}}' "$TAG")" \
  "$(stat -c %s "$ARCHIVE")"
finish
