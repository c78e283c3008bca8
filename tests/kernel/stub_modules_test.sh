#!/bin/sh
# The kernel tier's smoke test (docs/kernel-tier.md): in one guest of tests/kernel/guest, the stub NVIDIA
# stack on Debian 12's kernel shows what the host layer reads on a node: /proc/modules, holders/, refcnt,
# /proc/devices, the device nodes and the DRM node's module link, and delete_module's answers (through
# busybox rmmod, which prints the errno's text).
# On the host (no argument) it starts the guest with itself as the payload; in the guest (--in-guest) it
# checks, printing what it saw for every check.
set -u
if [ "${1:-}" != --in-guest ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  exec "$here/guest" run --payload "$here/stub_modules_test.sh" --timeout "${DM_KERNEL_TIMEOUT:-900}" -- \
    sh /payload/stub_modules_test.sh --in-guest
fi

S=/lib/modules/stub
failed=0
checks=0

pass() { checks=$((checks + 1)); echo "ok: $1"; }
fail() { checks=$((checks + 1)); failed=$((failed + 1)); echo "FAIL: $1"; }

expect() {  # WHAT EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then pass "$1: $3"; else fail "$1: expected '$2', saw '$3'"; fi
}

expect_match() {  # WHAT EXTENDED-REGEX TEXT
  if printf '%s\n' "$3" | grep -Eq -- "$2"; then pass "$1: $3"; else fail "$1: expected /$2/, saw '$3'"; fi
}

refcnt() { cat "/sys/module/$1/refcnt" 2>/dev/null || echo "(no /sys/module/$1/refcnt)"; }
holders() { ls "/sys/module/$1/holders" 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//'; }
# The fields after the name of a module's /proc/modules line but its size and address: count, "Used by", state.
modline() { awk -v m="$1" '$1 == m { print $3, $4, $5 }' /proc/modules; }
# The "Used by" field's names, sorted (the kernel lists the most recent first).
usedby() { awk -v m="$1" '$1 == m { print $4 }' /proc/modules | tr ',' '\n' | grep -v '^$' | sort | tr '\n' ' ' |
  sed 's/ $//'; }
devmajor() { awk -v n="$1" '$2 == n { print $1 }' /proc/devices; }
node() { stat -c '%F %t:%T' "$1" 2>/dev/null || echo "(no $1)"; }  # type and major:minor, in hex
hex() { printf '%x' "$1"; }

load() {  # MODULE [PARAM...]: insmod from the stubs, a check of its own
  m=$1
  shift
  if out=$(insmod "$S/$m.ko" "$@" 2>&1); then pass "insmod $m${*:+ $*}"; else fail "insmod $m${*:+ $*}: $out"; fi
}
unload() {  # MODULE: rmmod, a check of its own
  if out=$(rmmod "$1" 2>&1); then pass "rmmod $1"; else fail "rmmod $1: $out"; fi
}
refused() {  # MODULE ERRNO-TEXT: rmmod fails with that errno's text and the module stays
  out=$(rmmod "$1" 2>&1) && { fail "rmmod $1 was accepted (expected '$2')"; return; }
  expect_match "rmmod $1 refused" "$2" "$out"
  expect "$1 still loaded after the refusal" live "$(cat "/sys/module/$1/initstate" 2>/dev/null)"
}

hold() {  # DEVICE: a background process holding DEVICE open as its stdin; its pid in $held
  sleep 1000 <"$1" &
  held=$!
  # Until the child has opened it (the redirect happens in the child, before sleep starts).
  while [ "$(readlink "/proc/$held/fd/0" 2>/dev/null)" != "$1" ]; do
    kill -0 "$held" 2>/dev/null || { fail "a process could not open $1"; return; }
    usleep 10000
  done
}
release() { kill "$1"; wait "$1" 2>/dev/null; }

echo "== the guest's kernel: $(uname -r)"
[ -f "/lib/modules/$(uname -r)/kernel/drivers/gpu/drm/drm.ko" ] &&
  pass "booted the packaged kernel the initramfs was built for ($(uname -r))" ||
  fail "no /lib/modules/$(uname -r)/kernel/drivers/gpu/drm/drm.ko: the kernel is not the packaged one"

echo "== nvidia alone"
if out=$(modprobe drm 2>&1); then pass "modprobe drm (Debian's module)"; else fail "modprobe drm: $out"; fi
expect "drm before nvidia_drm" "0 - Live" "$(modline drm)"
load nvidia
expect "/proc/devices, major 195" nvidia "$(awk '$1 == 195 { print $2 }' /proc/devices)"
expect "/dev/nvidia0" "character special file c3:0" "$(node /dev/nvidia0)"
expect "/dev/nvidia1" "character special file c3:1" "$(node /dev/nvidia1)"
expect "no /dev/nvidia2 with gpus=2" "(no /dev/nvidia2)" "$(node /dev/nvidia2)"
expect "/dev/nvidiactl" "character special file c3:ff" "$(node /dev/nvidiactl)"
expect "/dev/nvidia-modeset" "character special file c3:fe" "$(node /dev/nvidia-modeset)"
caps=$(devmajor nvidia-caps)
expect_match "/proc/devices, nvidia-caps" '^[0-9]+$' "$caps"
expect "/dev/nvidia-caps/nvidia-cap1" "character special file $(hex "$caps"):1" "$(node /dev/nvidia-caps/nvidia-cap1)"
expect "/dev/nvidia-caps/nvidia-cap2" "character special file $(hex "$caps"):2" "$(node /dev/nvidia-caps/nvidia-cap2)"
imex=$(devmajor nvidia-caps-imex-channels)
expect_match "/proc/devices, nvidia-caps-imex-channels" '^[0-9]+$' "$imex"
expect "/dev/nvidia-caps-imex-channels/channel0" "character special file $(hex "$imex"):0" \
  "$(node /dev/nvidia-caps-imex-channels/channel0)"
out=$( (: </dev/nvidia-modeset) 2>&1) && fail "/dev/nvidia-modeset opened without nvidia_modeset" ||
  expect_match "/dev/nvidia-modeset without nvidia_modeset" 'No such device' "$out"
expect "nvidia's /proc/modules line" "0 - Live" "$(modline nvidia)"

echo "== the whole stack, in dependency order"
for m in nvidia_uvm nvidia_modeset nvidia_drm nvidia_vgpu_vfio nvidia_peermem gdrdrv nvidia_fs gpu_mon nouveau; do
  load "$m"
done
grep -E '^(nvidia|nvidia_[a-z_]+|drm|gdrdrv|gpu_mon|nouveau) ' /proc/modules | sed 's/^/  \/proc\/modules: /'
all_users="gdrdrv gpu_mon nvidia_drm nvidia_fs nvidia_modeset nvidia_peermem nvidia_uvm nvidia_vgpu_vfio"
# Eight holders links and the second reference of nvidia_vgpu_vfio, which no link shows.
expect "nvidia's count in /proc/modules" 9 "$(modline nvidia | cut -d' ' -f1)"
expect "nvidia's Used by in /proc/modules" "$all_users" "$(usedby nvidia)"
expect "nvidia's holders/" "$all_users" "$(holders nvidia)"
expect "nvidia's refcnt" 9 "$(refcnt nvidia)"
expect "nvidia's initstate" live "$(cat /sys/module/nvidia/initstate)"
expect "nvidia_modeset's /proc/modules line" "1 nvidia_drm, Live" "$(modline nvidia_modeset)"
expect "nvidia_modeset's holders/" nvidia_drm "$(holders nvidia_modeset)"
expect "nvidia_drm's /proc/modules line" "0 - Live" "$(modline nvidia_drm)"
# drm: nvidia_drm's link, and the DRM core's own pseudo file system, pinned while a DRM device exists.
expect "drm's /proc/modules line" "2 nvidia_drm, Live" "$(modline drm)"
expect "nouveau's /proc/modules line" "0 - Live" "$(modline nouveau)"
expect_match "/proc/devices, nvidia-uvm" '^[0-9]+$' "$(devmajor nvidia-uvm)"
uvm=$(hex "$(devmajor nvidia-uvm)")
expect "/dev/nvidia-uvm" "character special file $uvm:0" "$(node /dev/nvidia-uvm)"
expect "/dev/nvidia-uvm-tools" "character special file $uvm:1" "$(node /dev/nvidia-uvm-tools)"

echo "== the DRM node"
expect "/proc/devices, major 226" drm "$(awk '$1 == 226 { print $2 }' /proc/devices)"
expect "/dev/dri/card0" "character special file e2:0" "$(node /dev/dri/card0)"
expect "/dev/dri/renderD128" "character special file e2:80" "$(node /dev/dri/renderD128)"
expect "/sys/dev/char/226:0" ../../devices/platform/nvidia-drm.0/drm/card0 "$(readlink /sys/dev/char/226:0)"
expect "/sys/dev/char/226:0/device/driver" ../../../bus/platform/drivers/nvidia-drm \
  "$(readlink /sys/dev/char/226:0/device/driver)"
expect "/sys/dev/char/226:0/device/driver/module" /sys/module/nvidia_drm \
  "$(readlink -f /sys/dev/char/226:0/device/driver/module)"
expect "/sys/dev/char/226:128/device/driver/module" /sys/module/nvidia_drm \
  "$(readlink -f /sys/dev/char/226:128/device/driver/module)"

echo "== open device files hold references"
hold /dev/nvidia0
gpu_holder=$held
expect "a process's fd on /dev/nvidia0" /dev/nvidia0 "$(readlink "/proc/$gpu_holder/fd/0")"
expect "nvidia's refcnt with /dev/nvidia0 open" 10 "$(refcnt nvidia)"
expect "nvidia's count in /proc/modules with /dev/nvidia0 open" 10 "$(modline nvidia | cut -d' ' -f1)"
expect "nvidia's holders/ with /dev/nvidia0 open (files are no link)" "$all_users" "$(holders nvidia)"
hold /dev/nvidia-modeset
modeset_holder=$held
expect "nvidia's refcnt with /dev/nvidia-modeset open too" 11 "$(refcnt nvidia)"
expect "nvidia_modeset's refcnt with /dev/nvidia-modeset open" 2 "$(refcnt nvidia_modeset)"
hold /dev/dri/card0
drm_holder=$held
expect "nvidia_drm's refcnt with /dev/dri/card0 open" 1 "$(refcnt nvidia_drm)"
expect "drm's refcnt with /dev/dri/card0 open" 3 "$(refcnt drm)"
refused nvidia 'Resource temporarily unavailable'
refused nvidia_drm 'Resource temporarily unavailable'
release "$drm_holder"
release "$modeset_holder"
release "$gpu_holder"
expect "nvidia's refcnt once the files are closed" 9 "$(refcnt nvidia)"
expect "nvidia_modeset's refcnt once closed" 1 "$(refcnt nvidia_modeset)"
expect "nvidia_drm's refcnt once closed" 0 "$(refcnt nvidia_drm)"

echo "== unloading, holders first"
unload gpu_mon
unload nvidia_fs
unload gdrdrv
unload nvidia_peermem
expect "nvidia's refcnt before nvidia_vgpu_vfio goes" 5 "$(refcnt nvidia)"
unload nvidia_vgpu_vfio
expect "nvidia's refcnt after nvidia_vgpu_vfio went (its link and its pin)" 3 "$(refcnt nvidia)"
refused nvidia_modeset 'Resource temporarily unavailable'
unload nvidia_drm
expect "drm's refcnt after nvidia_drm went" 0 "$(refcnt drm)"
expect "no /dev/dri/card0 after nvidia_drm went" "(no /dev/dri/card0)" "$(node /dev/dri/card0)"
unload nvidia_modeset
unload nvidia_uvm
expect "nvidia's /proc/modules line without dependants" "0 - Live" "$(modline nvidia)"
hold /dev/nvidia0
expect "nvidia's refcnt with /dev/nvidia0 open and no dependant" 1 "$(refcnt nvidia)"
refused nvidia 'Resource temporarily unavailable'
release "$held"
unload nvidia
expect "/proc/devices without nvidia" "" "$(awk '$1 == 195' /proc/devices)"
expect "no /dev/nvidia0 after nvidia went" "(no /dev/nvidia0)" "$(node /dev/nvidia0)"
expect "no /sys/module/nvidia after nvidia went" absent "$([ -e /sys/module/nvidia ] && echo present || echo absent)"
unload nouveau

echo "== nvidia frontend=1 gpus=1 (drivers up to 535)"
load nvidia frontend=1 gpus=1
expect "/proc/devices, major 195, frontend=1" nvidia-frontend "$(awk '$1 == 195 { print $2 }' /proc/devices)"
expect "no /dev/nvidia1 with gpus=1" "(no /dev/nvidia1)" "$(node /dev/nvidia1)"

echo "== unexplained references (nvidia_modeset pins=2)"
load nvidia_modeset pins=2
expect "nvidia's holders/ with the pins" nvidia_modeset "$(holders nvidia)"
expect "nvidia's refcnt: one link and two pins" 3 "$(refcnt nvidia)"
expect "nvidia's /proc/modules line with the pins" "3 nvidia_modeset, Live" "$(modline nvidia)"

echo "== the DRM device on the GPU's device (nvidia_drm gpu_parent=1, the real module's shape)"
load nvidia_drm gpu_parent=1
expect "/sys/dev/char/226:0 with gpu_parent=1" ../../devices/platform/nvidia.0/drm/card0 \
  "$(readlink /sys/dev/char/226:0)"
expect "/sys/dev/char/226:0/device/driver/module with gpu_parent=1" /sys/module/nvidia \
  "$(readlink -f /sys/dev/char/226:0/device/driver/module)"
hold /dev/dri/card0
expect "nvidia_drm's refcnt with card0 open (gpu_parent=1)" 1 "$(refcnt nvidia_drm)"
release "$held"
unload nvidia_drm
unload nvidia_modeset
expect "nvidia's refcnt after the pins went" 0 "$(refcnt nvidia)"

echo "== a permanent module (no exit function)"
if out=$(insmod "$S/permanent/nvidia_peermem.ko" 2>&1); then pass "insmod permanent/nvidia_peermem"; else
  fail "insmod permanent/nvidia_peermem: $out"; fi
expect "permanent nvidia_peermem's /proc/modules line" "0 [permanent], Live" "$(modline nvidia_peermem)"
expect "permanent nvidia_peermem's refcnt" 0 "$(refcnt nvidia_peermem)"
refused nvidia_peermem 'Device or resource busy'
refused nvidia 'Resource temporarily unavailable'

echo "== $checks checks, $failed failed"
[ "$failed" -eq 0 ]
