# Shared by the image tests: build the image, run commands in it, count checks.
# Sourced; expects SRC (the source tree) to be set.
# shellcheck shell=bash disable=SC2034,SC2016  # variables are read by the tests; sh -c scripts are literal

export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
bah() { buildah --storage-driver vfs "$@"; }

passed=0
failed=0
pass() { passed=$((passed + 1)); printf 'ok   %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$1"; shift; (($#)) && printf '     %s\n' "$@"; return 0; }
finish() {
  printf '%d passed, %d failed\n' "$passed" "$failed"
  ((failed == 0))
}
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# check NAME EXPECTED ACTUAL: equality with both values shown on failure.
check_eq() {
  if [[ $2 == "$3" ]]; then pass "$1"; else fail "$1" "expected: $2" "actual:   $3"; fi
}
# check_has NAME NEEDLE HAYSTACK
check_has() {
  if [[ $3 == *"$2"* ]]; then pass "$1"; else fail "$1" "missing: $2" "in: $(head -c 2000 <<<"$3")"; fi
}

# Builds (or finds up to date) the image with scripts/image; sets ARCHIVE. A machine where buildah cannot work
# fails here with buildah's own words.
build_image() {
  [[ $EUID -eq 0 ]] || die "the image tests need root (buildah with vfs storage and chroot isolation)"
  command -v buildah >/dev/null || die "buildah is not installed (scripts/install-deps installs it)"
  local out
  if ! out=$(bah info 2>&1); then
    die "buildah cannot work on this machine (vfs storage, chroot isolation): $out"
  fi
  out=$("$SRC/scripts/image") || die "scripts/image failed (its log is above)"
  ARCHIVE=$(tail -n 1 <<<"$out")
  [[ -f $ARCHIVE ]] || die "scripts/image's last line is not a file: $ARCHIVE"
}

# The archive's image index (the manifest list its index.json names), and one platform's image manifest and
# configuration in it (linux/ARCH).
archive_blob() { tar -xOf "$ARCHIVE" "blobs/sha256/${1#sha256:}"; }
image_index() { archive_blob "$(tar -xOf "$ARCHIVE" index.json | jq -r '.manifests[0].digest')"; }
image_manifest() {
  archive_blob "$(image_index | jq -r --arg a "$1" \
    '.manifests[] | select(.platform.os == "linux" and .platform.architecture == $a) | .digest')"
}
image_config() { archive_blob "$(image_manifest "$1" | jq -r .config.digest)"; }

# image_listing ARCH: the files of linux/ARCH's layers, "mode owner/group path[ -> target]" with the path from
# /, sorted by path.
image_listing() {
  local media digest decompress
  while read -r media digest; do
    case $media in
      *tar+gzip) decompress=(gzip -dc) ;;
      *tar+zstd) decompress=(zstd -dc) ;;
      *tar) decompress=(cat) ;;
      *) die "unknown layer type $media" ;;
    esac
    archive_blob "$digest" | "${decompress[@]}" | tar -tv --numeric-owner -f - |
      awk '{ path = $6; sub(/^\.?\/?/, "/", path); if (path != "/") sub(/\/$/, "", path); if (path == "/") next
             line = $1 " " $2 " " path; if ($7 == "->") line = line " -> " $8; print line }'
  done < <(image_manifest "$1" | jq -r '.layers[] | "\(.mediaType) \(.digest)"') | sort -k3,3
}

# image_file ARCH PATH: the content of PATH (from /) in linux/ARCH's layers (the last layer holding it), streamed
# to stdout as it is (binary files included); exit 1 if no layer holds it.
image_file() {
  local media digest names at= member= decompress=() unpack=()
  while read -r media digest; do
    case $media in
      *tar+gzip) decompress=(gzip -dc) ;;
      *tar+zstd) decompress=(zstd -dc) ;;
      *) decompress=(cat) ;;
    esac
    # Member names come with or without a leading ./ (buildah writes them without).
    names=$(archive_blob "$digest" | "${decompress[@]}" | tar -tf -)
    if grep -qxF "${2#/}" <<<"$names"; then
      at=$digest member=${2#/} unpack=("${decompress[@]}")
    elif grep -qxF "./${2#/}" <<<"$names"; then
      at=$digest member=./${2#/} unpack=("${decompress[@]}")
    fi
  done < <(image_manifest "$1" | jq -r '.layers[] | "\(.mediaType) \(.digest)"')
  [[ -n $at ]] || return 1
  archive_blob "$at" | "${unpack[@]}" | tar -xOf - "$member"
}

# A working container from the archive itself (what a registry push or a containerd import takes); CTR is
# removed on exit.
CTR=
container_from_archive() {
  CTR=$(bah from --quiet "oci-archive:$ARCHIVE") || die "buildah from oci-archive:$ARCHIVE failed"
  trap 'cleanup' EXIT
}
cleanup_hooks=()
cleanup() {
  local h
  for h in "${cleanup_hooks[@]}"; do eval "$h"; done
  [[ -z $CTR ]] || bah rm "$CTR" >/dev/null 2>&1 || true
}

# in_image [buildah run options] -- CMD...: runs CMD in the container; OUT holds its stdout+stderr, RC its
# exit code. Both travel through files in a mounted directory rather than buildah's stdio relay, which under
# heavy load has been seen to drop a short-lived command's whole output.
OUT=
RC=
in_image() {
  local opts=() io relay
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  io=$(mktemp -d /tmp/dm-image-io.XXXXXX)
  relay=$(bah run --isolation chroot -v "$io:/dm-io" "${opts[@]}" "$CTR" -- \
    /bin/sh -c '"$@" >/dm-io/out 2>&1; echo $? >/dm-io/rc' sh "$@" 2>&1)
  if [[ -f $io/rc ]]; then
    RC=$(cat "$io/rc")
    OUT=$(cat "$io/out")
  else
    RC=-1
    OUT="buildah run did not run the command: $relay"
  fi
  rm -rf "$io"
}

# in_image_bg LOG [buildah run options] -- SHELL-COMMAND: runs `/bin/sh -c SHELL-COMMAND` in the container in
# the background, its output to LOG (through a mounted directory, as above); BG_PID is buildah's process.
in_image_bg() {
  local log=$1 opts=()
  shift
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  : >"$log"
  bah run --isolation chroot -v "$(dirname "$log"):/dm-io" "${opts[@]}" "$CTR" -- \
    /bin/sh -c 'exec >"/dm-io/$1" 2>&1; exec /bin/sh -c "$2"' sh "$(basename "$log")" "$1" \
    >>"$log.relay" 2>&1 &
  BG_PID=$!
}

# descendants PID: "pid comm" of every process below PID.
descendants() {
  ps -e -o pid=,ppid=,comm= | awk -v root="$1" '
    { parent[$1] = $2; comm[$1] = $3 }
    END {
      found[root] = 1
      do {
        added = 0
        for (p in parent) if (!(p in found) && (parent[p] in found)) { found[p] = 1; added = 1 }
      } while (added)
      for (p in found) if (p != root) print p, comm[p]
    }'
}

# stop_tree PID: ends PID and everything it started (by id), then reaps PID.
stop_tree() {
  local pids
  pids=$(descendants "$1" | cut -d' ' -f1)
  # shellcheck disable=SC2086
  kill -TERM "$1" $pids 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
