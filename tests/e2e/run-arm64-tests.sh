#!/bin/sh
# run-arm64-tests.sh - mayfly itself on arm64 (issue 28): the aarch64 build
# (tools/cross/aarch64-linux-gnu.ini) boots an arm64 Linux Image, jailed and
# under its aarch64 seccomp filters, with an initrd made here from busybox.
# Runs inside the arm64 harness (tools/harness/run-arm64 --guest-kernel, whose
# own Debian kernel is KERNEL) or on an arm64 host with KVM. Prints TAP.
#
# usage: run-arm64-tests.sh MAYFLY KERNEL [MODULES]
#   MODULES  a directory with KERNEL's virtio_mmio.ko and virtio_blk.ko, when it
#            builds them as modules (Debian's does): the guest loads them
# POSIX sh with busybox tools only. Exit status: 0 all passed, 1 a point
# failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail mktemp rm cat cpio find mkdir cp chmod mount dd
[ $# -eq 2 ] || [ $# -eq 3 ] || usage "run-arm64-tests.sh MAYFLY KERNEL [MODULES]"
mayfly=$1
kernel=$2
modules=${3:-}
case_timeout=${E2E_CASE_TIMEOUT:-180}
tap_timeouts="exit"
need_mayfly
need_kvm
tap_workdir mayfly-arm64
show() { tap_tail 30 "#     " "$1"; }
tap_diag() { tap_run_diag; }

# cgroup v2, for the jail's per-VM cgroup.
[ -e /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null

# The guest: busybox, and an init that says it is up, counts its CPUs,
# reads the first line of /dev/vda when there is one (loading virtio-mmio
# and virtio-blk first where they are modules), and then powers off, or
# reboots when its command line says mayfly.test=reboot.
g=$work/guest
mkdir -p "$g/bin" "$g/dev" "$g/proc" "$g/modules"
[ -z "$modules" ] || cp "$modules"/*.ko "$g/modules/"
bb=/bin/busybox
[ -f "$bb" ] || bb=$(command -v busybox)
cp "$bb" "$g/bin/busybox"
cat >"$g/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox mount -t proc proc /proc
exec >/dev/console 2>&1
/bin/busybox echo "init: up"
/bin/busybox echo "cpus: $(/bin/busybox grep -c ^processor /proc/cpuinfo)"
for m in virtio_mmio virtio_blk; do
	[ -f /modules/$m.ko ] && /bin/busybox insmod /modules/$m.ko
done
i=0
while [ ! -b /dev/vda ] && [ -d /sys/bus/platform/drivers/virtio-mmio ] && [ $i -lt 50 ]; do
	/bin/busybox sleep 0.1
	i=$((i + 1))
done
[ -b /dev/vda ] && /bin/busybox echo "vda: $(/bin/busybox head -n 1 /dev/vda)"
case " $(/bin/busybox cat /proc/cmdline) " in
*" mayfly.test=reboot "*) /bin/busybox echo "init: rebooting"; /bin/busybox reboot -f ;;
esac
/bin/busybox poweroff -f
INIT
chmod +x "$g/init"
(cd "$g" && find . | cpio -o -H newc 2>/dev/null) >"$work/initrd" || bail "cpio of the guest failed"
cmdline="console=ttyS0 panic=-1 rdinit=/init quiet"

cmd="boot --kernel $kernel --initrd initrd --cpus 2 --mem 256"
diag_shown=0
mf boot --kernel "$kernel" --initrd "$work/initrd" --cpus 2 --mem 256 --cmdline "$cmdline"
want_rc 0
has "$work/out" "init: up"
tap "boot: an arm64 Linux Image with an initrd, jailed and under aarch64 seccomp filters; its init's line on stdout, exit 0 after the guest's poweroff (PSCI SYSTEM_OFF)"
has "$work/out" "cpus: 2"
tap "--cpus 2: the guest brings both vCPUs up (PSCI CPU_ON on the GICv3's machine)"
if grep -qi seccomp "$work/err"; then fail "stderr names seccomp: $(grep -i seccomp "$work/err" | head -n 1)"; fi
tap "no thread of the boot met its seccomp filter (the tables resolved for aarch64)"

# A read-only disk whose first line the guest prints.
dd if=/dev/zero of="$work/disk.img" bs=1024 count=64 2>/dev/null
echo "mayfly-arm64-disk $$" | dd of="$work/disk.img" conv=notrunc 2>/dev/null
diag_shown=0
mf boot --kernel "$kernel" --initrd "$work/initrd" --mem 256 --cmdline "$cmdline" \
	--disk "$work/disk.img,ro"
want_rc 0
has "$work/out" "vda: mayfly-arm64-disk $$"
tap "--disk: a virtio-blk disk on virtio-mmio, found through the device tree with its SPI, reads back in the guest (the queue's notify by ioeventfd, its interrupt by irqfd)"

diag_shown=0
mf boot --kernel "$kernel" --initrd "$work/initrd" --mem 256 --cmdline "$cmdline mayfly.test=reboot"
want_rc 0
has "$work/out" "init: rebooting"
tap "a guest's reboot (PSCI SYSTEM_RESET) ends the VM, exit 0 as on x86"

diag_shown=0
mf boot --kernel "$work/initrd" --mem 256
want_rc 3
want_err_re "not an arm64 Image"
tap "a kernel that is no arm64 Image is refused with one line, exit 3"

tap_end
