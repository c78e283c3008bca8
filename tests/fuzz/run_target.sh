#!/usr/bin/env bash
# run_target.sh TARGET SECONDS [WORK_CORPUS_DIR]
# Runs the fuzz target TARGET of the `fuzz` preset's tree (build-fuzz/, or $DM_FUZZ_BUILD_DIR): first every
# input of its checked-in corpus tests/fuzz/corpus/TARGET (regression cases included), then new inputs for
# SECONDS seconds, with the target's dictionary. New interesting inputs go to WORK_CORPUS_DIR (a temporary
# directory when not given: the checked-in corpus is never written); a crashing input is kept under
# <build-fuzz>/fuzz-artifacts/TARGET/. Exit 0: no crash, leak, sanitizer report or timeout; 77: the target is
# not built (ctest reports the test as skipped).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target=$1 seconds=$2 work=${3:-}
build=${DM_FUZZ_BUILD_DIR:-$root/build-fuzz}
bin=$build/fuzz/$target
if [[ ! -x $bin ]]; then
  echo "SKIPPED: $bin is not built (ctest builds it first: the build.fuzz test; by hand: cmake --preset fuzz && cmake --build --preset fuzz)"
  exit 77
fi
corpus=$root/tests/fuzz/corpus/$target
[[ -d $corpus ]] || { echo "no checked-in corpus at $corpus" >&2; exit 1; }
case $target in
  http_*) dict=http ;;
  list_stream_fuzz | watch_events_fuzz | pod_views_fuzz | node_views_fuzz | lease_annotation_fuzz | exec_credential_fuzz | \
    paused_record_annotation_fuzz) dict=json ;;
  *) dict=$target ;;
esac
dict_args=()
[[ -f $root/tests/fuzz/dicts/$dict.dict ]] && dict_args=(-dict="$root/tests/fuzz/dicts/$dict.dict")
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work" "$build/fuzz-artifacts/$target"
echo "$target: replaying $(find "$corpus" -type f | wc -l) corpus files, then fuzzing for ${seconds}s"
# -timeout: an input taking 10 s is a hang; -rss_limit_mb: one taking 2 GB a memory blow-up. libFuzzer's
# own exit code for a failure is 77, which would read as "skipped": make it 1.
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -error_exitcode=1 \
  -artifact_prefix="$build/fuzz-artifacts/$target/" "${dict_args[@]}" "$work" "$corpus"
