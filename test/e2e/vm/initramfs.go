package vm

// initScript is the initramfs's /init. It loads the modules (mod/order:
// dependencies first), answers a probe boot, mounts the shared root file
// system read-only under a tmpfs overlay (so every boot starts from the
// cached tree and writes nothing into it) and the payload at /vm, copies
// the payload's etc/ over the root's /etc (systemd units and masks), and
// hands over to systemd (nrivm.init=systemd) or to the payload's boot.sh
// with cgroup v2 mounted (nrivm.init=busybox). A failure is reported on
// the console with the NRIVM-FAILED marker and powers the guest off.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
fail() { echo "NRIVM-FAILED: initramfs: $*"; poweroff -f; sleep 60; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mod/order); do insmod /mod/$m.ko || fail "insmod $m"; done
if grep -qw nrivm.probe /proc/cmdline; then
	echo "NRIVM-PROBE ok"
	poweroff -f
	sleep 60
fi
init=busybox
for a in $(cat /proc/cmdline); do
	case "$a" in nrivm.init=*) init="${a#nrivm.init=}";; esac
done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro rootfs /lower || fail "mount the root file system"
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "mount the overlay's tmpfs"
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot || fail "mount the overlay"
mkdir -p /newroot/vm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap vm /newroot/vm || fail "mount the payload"
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp || fail "mount /tmp"
if [ -d /newroot/vm/etc ]; then cp -a /newroot/vm/etc/. /newroot/etc/ || fail "copy the payload's etc"; fi
umount /proc /sys
mount --move /dev /newroot/dev || fail "move /dev"
case "$init" in
systemd)
	exec switch_root /newroot /sbin/init
	;;
busybox)
	mount -t proc proc /newroot/proc
	mount -t sysfs sys /newroot/sys
	mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup || fail "mount cgroup2"
	mount -t tmpfs -o mode=0755 tmpfs /newroot/run
	mkdir -p /newroot/dev/pts /newroot/dev/shm
	mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
	mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
	exec switch_root /newroot /bin/sh /vm/boot.sh
	;;
esac
fail "unknown nrivm.init=$init"
`
