# shellcheck shell=bash
# The times bench/operator-upgrade reads from its watches (sourced; tests/unit/bench_operator_times_test.sh).
#
# A pod watch file has one line per event: "<epoch.ms> <ADDED|MODIFIED|DELETED> <pod> [<deletionTimestamp>
# <deletionGracePeriodSeconds>]"; a node-state watch file "<epoch.ms> <upgrade state> [true]" (true: cordoned).

# An RFC 3339 time as epoch seconds; nothing for an empty or null one.
ts() { [[ -z $1 || $1 == null ]] || date -d "$1" +%s; }

# When pod $2 was gone (its first DELETED line in the pod watch file $1), or nothing.
pod_gone_at() { awk -v p="$2" '$2 == "DELETED" && $3 == p { print $1; exit }' "$1"; }

# When the deletion of pod $2 was asked for (epoch seconds), from the pod watch file $1: the API server sets
# the deletionTimestamp to the request plus the grace period (when the kubelet may kill the pod), so the
# request is the first terminating line's deletionTimestamp minus its grace period (the kubelet's final
# delete rewrites both: timestamp now, grace 0). Nothing if the watch never saw the pod terminating.
pod_delete_request_at() {
  local stamp grace
  read -r stamp grace < <(awk -v p="$2" '$3 == p && $4 != "" { print $4, $5; exit }' "$1")
  [[ -n $stamp ]] || return 0
  echo $(($(ts "$stamp") - ${grace:-0}))
}

# The first upgrade-done of the node-state watch file $1 after the node left upgrade-done (its first line is
# the state before the upgrade, which can arrive after the deletion when the controller is quick), or nothing.
upgrade_done_at() {
  awk '$2 != "upgrade-done" { left = 1 } left && $2 == "upgrade-done" { print $1; exit }' "$1"
}

# The last of the pods named in $2.. to be gone (the latest of their first DELETED lines in the pod watch file
# $1), or nothing when one of them never was.
pods_all_gone_at() {
  local file=$1 p at last=
  shift
  for p in "$@"; do
    at=$(pod_gone_at "$file" "$p")
    [[ -n $at ]] || return 0
    [[ -n $last ]] && awk -v a="$at" -v b="$last" 'BEGIN { exit !(a <= b) }' || last=$at
  done
  printf '%s\n' "$last"
}

# A container log as the kubelet keeps it ("<RFC 3339 time> <stream> <F|P> <line>"), each line with the
# seconds from $1 (epoch seconds) to its time in front: "+12.34 <line>". Lines of another shape are kept as
# they are.
log_since() {
  local t0=$1 line stamp at
  while IFS= read -r line; do
    stamp=${line%% *}
    if at=$(date -d "$stamp" +%s.%N 2>/dev/null); then
      line=${line#* }  # the stream
      line=${line#* }  # the tag
      line=${line#* }
      printf '%+6.2f %s\n' "$(awk -v a="$at" -v b="$t0" 'BEGIN { print a - b }')" "$line"
    else
      printf '%s\n' "$line"
    fi
  done
}
