#!/usr/bin/env bash
# Runs one cross-built arm64 unit test executable under qemu-aarch64-static, with dpkg multiarch's arm64 loader
# and libc (libc6:arm64), as the release-arm64 tree's own `ctest` does (CMAKE_CROSSCOMPILING_EMULATOR).
# Usage: run-unit-test.sh ARM64_BUILD_DIR NAME [gtest arguments]
set -uo pipefail
build=${1:?usage: $0 ARM64_BUILD_DIR NAME}
name=${2:?usage: $0 ARM64_BUILD_DIR NAME}
shift 2
exe=$build/tests/$name
qemu=$(command -v qemu-aarch64-static) ||
  { echo "FAIL: qemu-aarch64-static is not installed (scripts/install-deps installs it)"; exit 1; }
[[ -f $exe ]] || {
  echo "FAIL: $exe is missing: the arm64 tree is not built (ctest builds it first: the build.release-arm64 test; by hand: cmake --preset release-arm64 && cmake --build --preset release-arm64)"
  exit 1
}
# An x86-64 executable would pass here without testing arm64 at all: e_machine must be 183 (EM_AARCH64).
machine=$(od -An -tu2 -j18 -N2 "$exe" | tr -d ' ')
[[ $machine == 183 ]] || { echo "FAIL: $exe is not an arm64 executable (ELF machine $machine)"; exit 1; }
exec "$qemu" "$exe" --gtest_color=no "$@"
