#!/usr/bin/env bash
# tests/kernel/guest run --forward (docs/kernel-tier.md): in one guest, 127.0.0.1:PORT of this machine (a
# busybox httpd serving a random token) answers at 10.0.2.100:PORT, and nothing else does: another port
# there, the user network's gateway, an outside address.
# On the host (no argument) it starts the server and the guest; in the guest (--in-guest PORT TOKEN) it checks.
set -u
if [[ ${1:-} == --in-guest ]]; then
  port=$2 token=$3 failed=0
  check() {  # WHAT EXPECTED ACTUAL
    if [[ $2 == "$3" ]]; then echo "ok: $1: $3"; else echo "FAIL: $1: expected '$2', saw '$3'"; failed=1; fi
  }
  # busybox wget: -q is left out, as it crashes on a refused connection.
  got=$(wget -O - "http://10.0.2.100:$port/token" 2>/dev/null)
  check "10.0.2.100:$port (forwarded to the host's 127.0.0.1:$port)" "$token" "$got"
  for url in "http://10.0.2.100:$((port + 1))/" "http://10.0.2.2:$port/" "http://1.1.1.1/"; do
    out=$(timeout 30 wget -O /dev/null "$url" 2>&1)
    check "$url unreachable" refused "$(grep -q 'Connection refused' <<<"$out" && echo refused || echo "$out")"
  done
  exit "$failed"
fi

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
server=
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
token=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
mkdir -p "$work/www" "$work/payload"
printf '%s' "$token" >"$work/www/token"
cp "$0" "$work/payload/guest_forward_test.sh"
# The guest's shell is busybox sh, which has no [[ ]]: the checks run under the payload's own bash.
cp /bin/bash "$work/payload/bash"

serves_token() {  # PORT: whether 127.0.0.1:PORT answers with our token (and not another program's page)
  local reply
  reply=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET /token HTTP/1.0\r\n\r\n" >&3 &&
    cat <&3' _ "$1" 2>/dev/null) || return 1
  [[ $reply == *"$token" ]]
}
# A free port: busybox httpd exits when another program has it (control planes of other tests listen
# around here), so a port counts once our own server answers there with the token.
for _ in $(seq 20); do
  port=$((20000 + RANDOM % 20000))
  busybox httpd -f -p "127.0.0.1:$port" -h "$work/www" 2>/dev/null &
  server=$!
  for _ in $(seq 100); do
    serves_token "$port" && break 2
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  server=
done
[[ -n $server ]] || { echo "no free port for the host's server"; exit 1; }
echo "host: serving token $token on 127.0.0.1:$port"
"$here/guest" run --payload "$work/payload" --forward "$port" --timeout "${DM_KERNEL_TIMEOUT:-900}" -- \
  /payload/bash /payload/guest_forward_test.sh --in-guest "$port" "$token"
