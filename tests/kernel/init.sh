#!/bin/sh
# /init of the kernel tier's guest (tests/kernel/guest, docs/kernel-tier.md), run by busybox sh as PID 1.
# Mounts what a node has, runs the command of /etc/guest/cmd as a child with the console as its stdio,
# prints the exit marker of /etc/guest/marker with its exit code and powers the machine off.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The kernel could not give PID 1 a console before devtmpfs was there.
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
export PATH=/sbin:/bin:/usr/sbin:/usr/bin HOME=/root TERM=dumb
if [ -f /etc/guest/net ]; then
  # --forward: the user network's fixed addresses; only the forwarded ports answer (restrict=on).
  modprobe e1000
  ip link set eth0 up
  ip addr add 10.0.2.15/24 dev eth0
  ip route add default via 10.0.2.2
fi
echo "guest kernel: $(uname -r)"
cd /
rc=0
sh /etc/guest/cmd </dev/console || rc=$?
echo "$(cat /etc/guest/marker) $rc"
sync
poweroff -f
# poweroff failed: end PID 1, which panics the kernel (panic=-1 reboots, -no-reboot stops qemu).
exit "$rc"
