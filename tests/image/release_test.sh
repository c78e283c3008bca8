#!/usr/bin/env bash
# scripts/release: refuses what it cannot release before writing anything, then writes the multi-arch archive,
# its digest, an SPDX 2.3 SBOM and SHA256SUMS; checked against the archive's own blobs and layers: the digest
# is the image index's, the checksums hold, the labels say what the image is, and the SBOM lists driver-manager
# (version, commit), every package of each platform's third-party.tsv, and every file with its checksums.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/image/lib.sh
. "$SRC/tests/image/lib.sh"
[[ $EUID -eq 0 ]] || die "the release test needs root (scripts/image: buildah with vfs storage)"

work=$(mktemp -d /tmp/dm-release-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^project(driver-manager VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
commit=$(git -C "$SRC" rev-parse --short HEAD)
source_url=https://git.example.org/gpu/driver-manager
dirty=()
[[ -z $(git -C "$SRC" status --porcelain --untracked-files=no) ]] || dirty=(--allow-dirty)

# --- refusals, before any write -----------------------------------------------------------------------------
out=$(DM_IMAGE_SOURCE='' "$SRC/scripts/release" --output "$work/none" "${dirty[@]}" 2>&1)
rc=$?
check_eq "without a source URL: exit 1, nothing written" "1 no" "$rc $([[ -e $work/none ]] && echo yes || echo no)"
check_has "... naming DM_IMAGE_SOURCE" "set DM_IMAGE_SOURCE" "$out"
out=$(DM_IMAGE_SOURCE='not a url' "$SRC/scripts/release" --output "$work/none" "${dirty[@]}" 2>&1)
check_eq "a source that is not a URL: exit 1, nothing written" "1 no" "$? $([[ -e $work/none ]] && echo yes || echo no)"
check_has "... naming it" "DM_IMAGE_SOURCE 'not a url' is not a URL" "$out"
if ((${#dirty[@]})); then
  out=$(DM_IMAGE_SOURCE=$source_url "$SRC/scripts/release" --output "$work/none" 2>&1)
  check_eq "uncommitted changes without --allow-dirty: exit 1, nothing written" "1 no" \
    "$? $([[ -e $work/none ]] && echo yes || echo no)"
fi

# --- the release ----------------------------------------------------------------------------------------------
rel=$work/rel
if ! out=$(DM_IMAGE_SOURCE=$source_url "$SRC/scripts/release" --output "$rel" "${dirty[@]}"); then
  die "scripts/release failed (its log is above)"
fi
check_eq "the last line is the release directory" "$rel" "$(tail -n 1 <<<"$out")"
name=driver-manager-$version
ARCHIVE=$rel/$name.oci.tar
check_eq "the release holds the archive, digest, SBOM and SHA256SUMS" \
  "SHA256SUMS $name.digest $name.oci.tar $name.spdx.json" "$(cd "$rel" && ls | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"
sums=$(cd "$rel" && sha256sum -c SHA256SUMS 2>&1)
check_eq "SHA256SUMS holds for its three files" "0 3" "$? $(grep -c ': OK$' <<<"$sums")"
check_eq "SHA256SUMS names the three files" "$name.digest $name.oci.tar $name.spdx.json" \
  "$(awk '{ print $2 }' "$rel/SHA256SUMS" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"
digest=$(cat "$rel/$name.digest")
check_eq "the digest file is the image index's digest in index.json" \
  "$(tar -xOf "$ARCHIVE" index.json | jq -r '.manifests[0].digest')" "$digest"
check_eq "... and the index blob hashes to it" "$digest" "sha256:$(archive_blob "$digest" | sha256sum | cut -d' ' -f1)"
check_eq "the index names localhost/driver-manager:$version" "localhost/driver-manager:$version" \
  "$(tar -xOf "$ARCHIVE" index.json | jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]')"

# --- labels, per platform ---------------------------------------------------------------------------------
for arch in amd64 arm64; do
  check_eq "linux/$arch labels: title version revision source licenses" \
    "driver-manager $version $commit $source_url Apache-2.0" \
    "$(image_config "$arch" | jq -r '.config.Labels | [."org.opencontainers.image.title",
        ."org.opencontainers.image.version", ."org.opencontainers.image.revision",
        ."org.opencontainers.image.source", ."org.opencontainers.image.licenses"] | join(" ")')"
done

# --- the SBOM -------------------------------------------------------------------------------------------------
sbom=$rel/$name.spdx.json
if jq -e . "$sbom" >/dev/null 2>&1; then pass "the SBOM is JSON"; else fail "the SBOM is JSON" "$(head -c 300 "$sbom")"; fi
check_eq "SPDX 2.3, CC0-1.0 data licence, describes the image" "SPDX-2.3 CC0-1.0 SPDXRef-Image" \
  "$(jq -r '[.spdxVersion, .dataLicense,
      (.relationships[] | select(.spdxElementId == "SPDXRef-DOCUMENT" and .relationshipType == "DESCRIBES")
       | .relatedSpdxElement)] | join(" ")' "$sbom")"
check_eq "every SPDXID is unique and well-formed" "0 0" \
  "$(jq '[.packages[].SPDXID, .files[].SPDXID] | (length - (unique | length))' "$sbom") $(jq \
    '[.packages[].SPDXID, .files[].SPDXID] | map(select(test("^SPDXRef-[A-Za-z0-9.-]+$") | not)) | length' "$sbom")"
check_eq "every relationship names elements of the document" "0" \
  "$(jq '([.packages[].SPDXID, .files[].SPDXID, "SPDXRef-DOCUMENT"]) as $ids
      | [.relationships[] | select((.spdxElementId | IN($ids[]) | not) or (.relatedSpdxElement | IN($ids[]) | not))]
      | length' "$sbom")"
check_eq "every package has name, version, download location and licence fields" "0" \
  "$(jq '[.packages[] | select(.name == null or .versionInfo == null or .downloadLocation == null
      or .licenseConcluded == null or .copyrightText == null)] | length' "$sbom")"
check_eq "the image index is a package with its digest" "${digest#sha256:}" \
  "$(jq -r '.packages[] | select(.SPDXID == "SPDXRef-Image") | .checksums[0].checksumValue' "$sbom")"
check_eq "driver-manager: version, commit, Apache-2.0, source" \
  "$version|commit $commit$( ((${#dirty[@]})) && echo ' plus uncommitted changes in the work tree')|Apache-2.0|git+$source_url@$commit" \
  "$(jq -r '.packages[] | select(.SPDXID == "SPDXRef-Package-driver-manager")
      | [.versionInfo, .sourceInfo, .licenseDeclared, .downloadLocation] | join("|")' "$sbom")"
for arch in amd64 arm64; do
  tsv=$(image_file "$arch" /usr/share/doc/driver-manager/third-party.tsv)
  want=$(awk -F'\t' -v a="$arch" 'NR > 1 { print $1 " " $2 " " a }' <<<"$tsv" | sort)
  have=$(jq -r --arg a "$arch" '.packages[] | select(.SPDXID | startswith("SPDXRef-Package-deb-")
      and endswith("-" + $a)) | "\(.name) \(.versionInfo) \($a)"' "$sbom" | sort)
  check_eq "linux/$arch: the SBOM lists each package of the image's third-party.tsv with its version" "$want" "$have"
  check_has "linux/$arch: busybox-static from the Debian source package busybox" \
    "built from the Debian source package busybox " \
    "$(jq -r --arg a "$arch" '.packages[] | select(.name == "busybox-static" and (.SPDXID | endswith($a)))
        | .sourceInfo' "$sbom")"
  # Every regular file of the image, each with SHA-1 and SHA-256; driver-manager's own hash checked.
  regular=$(image_listing "$arch" | awk '$1 ~ /^-/ { print "." $3 }' | sort)
  ids=$(jq -r --arg a "$arch" '.files[] | select(.SPDXID | startswith("SPDXRef-File-" + $a + "-")) | .fileName' "$sbom" |
    sort)
  check_eq "linux/$arch: the SBOM lists every regular file of the image ($(wc -l <<<"$regular"))" "$regular" "$ids"
  check_eq "linux/$arch: /usr/bin/driver-manager's SHA-256 is the image's, and it belongs to driver-manager" \
    "$(image_file "$arch" /usr/bin/driver-manager | sha256sum | cut -d' ' -f1) SPDXRef-Package-driver-manager" \
    "$(jq -r --arg a "$arch" '(.files[] | select(.fileName == "./usr/bin/driver-manager"
        and (.SPDXID | startswith("SPDXRef-File-" + $a + "-")))) as $f
      | "\($f.checksums[] | select(.algorithm == "SHA256") | .checksumValue) \(.relationships[]
        | select(.relatedSpdxElement == $f.SPDXID) | .spdxElementId)"' "$sbom")"
  check_eq "linux/$arch: every file has a SHA-1 and a SHA-256" "0" \
    "$(jq '[.files[] | select([.checksums[].algorithm] | sort != ["SHA1", "SHA256"])] | length' "$sbom")"
done
check_has "libssl3's files belong to libssl3 (amd64)" "SPDXRef-Package-deb-libssl3-amd64" \
  "$(jq -r '(.files[] | select(.fileName == "./usr/lib/x86_64-linux-gnu/libssl.so.3")) as $f
    | .relationships[] | select(.relatedSpdxElement == $f.SPDXID) | .spdxElementId' "$sbom")"
finish
