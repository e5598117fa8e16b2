#!/bin/sh
# run-snapshot-tests.sh - snapshots of the default Linux guest, end to end: create
# one with a --setup, restore it 20 times in a row and 4 at once, check each
# copy is fresh (files, clock, entropy) and the files never change, and that
# every kind of bad snapshot is refused before any guest code runs, and that a
# running VM whose memory or disk-vda file is cut short ends with a clear
# line. Prints TAP. The same points on x86 and on arm64 (issue 28: in the
# arm64 harness, from tools/test), where the guest differs.
#
# usage: run-snapshot-tests MAYFLY GUESTDIR SNAPEDIT
#   GUESTDIR  tools/build-guest's: x86's vmlinux, bzImage and rootfs.ext4, or
#             arm64's Image and rootfs.ext4 (or rootfs.ext4.gz, unpacked here)
#   SNAPEDIT  tests/e2e/snapedit.c: makes a snapshot another CPU's (x86: a
#             CPUID feature this host lacks; arm64: another KVM CPU target)
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cmp sha256sum dd od cp stat date gunzip ln df awk
[ $# -eq 3 ] || usage "run-snapshot-tests MAYFLY GUESTDIR SNAPEDIT"
mayfly=$1
guestdir=$2
snapedit=$3
case_timeout=${E2E_CASE_TIMEOUT:-120}

need_mayfly
need_kvm e2e-suite
tap_workdir snapshot-tests

# What differs by machine: the guest's files, another kernel than the
# snapshot's (x86: the same kernel as a bzImage; arm64: an Image with a byte
# more), and snapedit's change with the refusal it brings.
if [ "$(uname -m)" = aarch64 ]; then
	if [ ! -r "$guestdir/rootfs.ext4" ] && [ -r "$guestdir/rootfs.ext4.gz" ]; then
		mkdir "$work/guest" && ln -s "$(cd "$guestdir" && pwd)/Image" "$work/guest/Image" &&
			gunzip -c "$guestdir/rootfs.ext4.gz" >"$work/guest/rootfs.ext4" ||
			bail "cannot unpack $guestdir/rootfs.ext4.gz"
		guestdir=$work/guest
	fi
	need_guest "$guestdir" Image rootfs.ext4
	cp "$guestdir/Image" "$work/other-kernel" && printf 'x' >>"$work/other-kernel" ||
		bail "cannot copy $guestdir/Image"
	other_kernel=$work/other-kernel
	other_cpu() { "$snapedit" "$1" 0x7fff; }
	other_cpu_refusal="taken on another CPU (KVM target 32767; this host's is"
else
	need_guest "$guestdir" vmlinux bzImage rootfs.ext4
	other_kernel=$guestdir/bzImage
	other_cpu() { "$snapedit" "$1" 7 0 ebx 16; }
	other_cpu_refusal="lacks a feature"
fi
export MAYFLY_GUEST_DIR="$guestdir"

# A failed point: the last lines of the last run's stderr.
tap_diag() {
	tap_tail 8 "# stderr: " "$work/err"
}

want_out() {
	grep -qxF -- "$1" "$work/out" || fail "stdout lacks the line '$1'"
}
# refused PATTERN: one stderr line matching PATTERN, exit 125.
refused() {
	want_rc 125
	[ "$(wc -l <"$work/err")" -eq 1 ] || fail "$(wc -l <"$work/err") stderr lines, want 1"
	grep -q -- "$1" "$work/err" || fail "stderr lacks /$1/: $(head -c 200 "$work/err")"
}
sums() {
	sha256sum "$snap/state" "$snap/memory" "$snap/disk-vda" "$guestdir/rootfs.ext4" | cut -d' ' -f1
}

snap=$work/snap
mf snapshot create --setup 'echo setup-ok >/root/setup.txt' --setup 'mkdir -p /root/runs' \
	--out "$snap" -v
want_rc 0
for f in state memory disk-vda; do
	[ -s "$snap/$f" ] || fail "$snap/$f is missing or empty"
done
# Sparse: a 256 MiB guest writes only what it used.
blocks=$(stat -c %b "$snap/memory" 2>/dev/null)
size=$(stat -c %s "$snap/memory" 2>/dev/null)
[ "$size" = $((256 << 20)) ] || fail "memory file is $size bytes, want 256 MiB"
[ "$((${blocks:-0} * 512))" -lt $((128 << 20)) ] || fail "memory file uses $blocks blocks: not sparse"
echo "# memory file: $size bytes, $((${blocks:-0} / 2)) KiB used"
tap "snapshot create --setup: state, sparse memory and the root's overlay written"

# A full disk under --out: a 4 MiB tmpfs cannot hold the memory file.
small=$work/small
mkdir -p "$small" && mount -t tmpfs -o size=4m tmpfs "$small" || bail "cannot mount a tmpfs on $small"
mf snapshot create --out "$small/snap"
[ "$rc" -ne 0 ] || fail "snapshot create on a full disk exited 0"
grep -q "No space left on device" "$work/err" || fail "stderr does not say the disk is full: $(tail -c 300 "$work/err")"
[ ! -e "$small/snap" ] || fail "a snapshot was installed from a failed save"
left=$(ls -A "$small")
[ -z "$left" ] || fail "left on the full disk: $left"
[ "$(df -k "$small" | awk 'NR == 2 { print $3 }')" -eq 0 ] || fail "the space was not given back: $(df -k "$small" | tail -n 1)"
umount "$small" || fail "cannot unmount $small (something still holds it)"
tap "snapshot create on a full disk: exit $rc, 'No space left on device', no snapshot or temporary directory left, space given back"

before=$(sums)
i=0
while [ $i -lt 20 ]; do
	mf run --snapshot "$snap" -- sh -c "cat /root/setup.txt; ls /root/runs; touch /root/runs/r$i; exit $((i % 7))"
	if [ "$rc" -ne $((i % 7)) ] || ! grep -qxF setup-ok "$work/out" || grep -q '^r' "$work/out"; then
		fail "run $i: exit $rc, output: $(tr '\n' ' ' <"$work/out" | head -c 200)"
		break
	fi
	i=$((i + 1))
done
tap "20 runs in a row from one snapshot: each sees the setup's file, none another run's, exit codes through"

for i in 1 2 3 4; do
	timeout -k 5 "$case_timeout" "$mayfly" run --snapshot "$snap" -- \
		sh -c "cat /root/setup.txt; ls /root/runs; touch /root/runs/p$i; echo pid-\$\$" \
		</dev/null >"$work/par$i" 2>"$work/parerr$i" &
	eval "pid$i=\$!"
done
for i in 1 2 3 4; do
	eval "wait \$pid$i"
	r=$?
	[ $r -eq 0 ] || fail "parallel run $i exit $r: $(head -c 200 "$work/parerr$i")"
	grep -qxF setup-ok "$work/par$i" || fail "parallel run $i did not see the setup file"
	grep -q '^p[0-9]$' "$work/par$i" && fail "parallel run $i saw another run's file"
done
tap "4 runs at once from one snapshot: each on its own copy"

mf run --snapshot "$snap" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"'
a=$(cat "$work/out")
mf run --snapshot "$snap" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"'
b=$(cat "$work/out")
[ ${#a} -eq 64 ] && [ ${#b} -eq 64 ] || fail "did not read 32 bytes: '$a' '$b'"
[ "$a" != "$b" ] || fail "two restored VMs read the same 32 bytes from /dev/urandom: $a"
tap "two restores read different bytes from /dev/urandom (fresh entropy each)"

sleep 3   # the guest's clock stopped when the snapshot was taken: it must not lag now
mf run --snapshot "$snap" -- date +%s
host=$(date +%s)
guest=$(head -n 1 "$work/out")
case $guest in '' | *[!0-9]*) fail "date printed '$guest'" ;; esac
d=$((host - ${guest:-0}))
[ $d -le 2 ] && [ $d -ge -2 ] || fail "guest clock $guest, host $host: $d s apart"
tap "a restored guest's wall clock is the host's (within 2 s)"

[ "$(sums)" = "$before" ] || fail "a snapshot file or the base image changed"
tap "the snapshot's files and the base image are unchanged (sha256) after 27 restores"

# ---- refusals, each before any guest code runs ----

copy() {
	rm -rf "$work/bad"
	mkdir "$work/bad"
	cp "$snap/state" "$snap/memory" "$snap/disk-vda" "$work/bad/" ||
		fail "cannot copy the snapshot (is $work's file system full?)"
}
copy
printf '\377' | dd of="$work/bad/state" bs=1 seek=200 conv=notrunc 2>/dev/null
mf run --snapshot "$work/bad" -- true
refused "crc32 mismatch"
tap "a state file with a flipped byte is refused"

copy
head -c 1000 "$snap/state" >"$work/bad/state"
mf run --snapshot "$work/bad" -- true
refused "snapshot"
tap "a truncated state file is refused"

copy
printf '\077' | dd of="$work/bad/state" bs=1 seek=8 conv=notrunc 2>/dev/null
mf run --snapshot "$work/bad" -- true
refused "format version 63"
tap "a state file of another format version is refused"

copy
printf '\377' | dd of="$work/bad/memory" bs=1 seek=4096 conv=notrunc 2>/dev/null
mf run --snapshot "$work/bad" -- true
refused "not the file this snapshot wrote"
tap "a memory file changed since the snapshot is refused"

copy
head -c $((16 << 20)) "$snap/memory" >"$work/bad/memory"
mf run --snapshot "$work/bad" -- true
refused "memory"
tap "a truncated memory file is refused"

cp "$guestdir/rootfs.ext4" "$work/other.ext4"
mf run --snapshot "$snap" --rootfs "$work/other.ext4" -- cat /root/setup.txt
want_rc 0
want_out setup-ok
tap "a copy of the base image with the same content is accepted"

printf 'x' | dd of="$work/other.ext4" bs=1 seek=2000000 conv=notrunc 2>/dev/null
mf run --snapshot "$snap" --rootfs "$work/other.ext4" -- true
refused "not the one this snapshot was made from"
tap "a base image with other content is refused"

mf run --snapshot "$snap" --kernel "$other_kernel" -- true
refused "not the one this snapshot booted"
tap "another kernel than the snapshot's is refused"

mf run --snapshot "$snap" --mem 512 -- true
refused "differs from the snapshot's 256 MiB"
mf boot --snapshot "$snap" --cpus 2
want_rc 2
tap "--mem or --cpus other than the snapshot's is refused (run 125, boot 2)"

copy
other_cpu "$work/bad/state" || fail "snapedit failed"
mf run --snapshot "$work/bad" -- true
refused "$other_cpu_refusal"
mf boot --snapshot "$work/bad"
want_rc 5
tap "a snapshot from another CPU (x86: a feature this host lacks; arm64: another KVM target) is refused (run 125, boot 5)"

# ---- a memory file cut short while a VM runs from it ----

# Its pages go from under the mapping (the VM's private copies too): the
# VM must end with one line naming the cause and exit 7, whichever touches
# a lost page first, a vCPU (KVM_RUN fails) or the I/O thread (SIGBUS).
copy
sock=$work/cut.sock
timeout -k 5 "$case_timeout" "$mayfly" boot --snapshot "$work/bad" --vsock "$sock" \
	</dev/null >"$work/cut.out" 2>"$work/cut.err" &
bootpid=$!
i=0
while [ ! -S "$sock" ] && [ $i -lt 300 ] && kill -0 $bootpid 2>/dev/null; do
	sleep 0.1   # the restore hashes the snapshot's files before it listens
	i=$((i + 1))
done
mf exec --vsock "$sock" -- echo up
want_out up
: >"$work/bad/memory"
mf exec --vsock "$sock" -- echo after
[ "$rc" -ne 0 ] || fail "mayfly exec ran a command in a VM whose memory file is empty"
wait $bootpid
rc=$?
want_rc 7
grep -q "guest RAM is gone: the snapshot's memory file was cut short" "$work/cut.err" ||
	fail "boot's stderr does not name the cut memory file: $(tail -c 300 "$work/cut.err")"
[ ! -e "$sock" ] || fail "the VM's socket $sock was left behind"
tap "a memory file cut short while its VM runs: the VM ends, exit 7, one line naming the cause"

# The same for the root disk's overlay: its blocks (the setup's file among
# them) are mapped from disk-vda. Dropping the guest's page cache makes the
# next read of the setup file come from the cut overlay.
copy
sock=$work/cutdisk.sock
timeout -k 5 "$case_timeout" "$mayfly" boot --snapshot "$work/bad" --vsock "$sock" \
	</dev/null >"$work/cutdisk.out" 2>"$work/cutdisk.err" &
bootpid=$!
i=0
while [ ! -S "$sock" ] && [ $i -lt 300 ] && kill -0 $bootpid 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
mf exec --vsock "$sock" -- cat /root/setup.txt
want_out setup-ok
: >"$work/bad/disk-vda"
mf exec --vsock "$sock" -- sh -c 'echo 3 >/proc/sys/vm/drop_caches; cat /root/setup.txt'
[ "$rc" -ne 0 ] || fail "mayfly exec read the setup file from an overlay that is empty"
wait $bootpid
rc=$?
want_rc 7
grep -q "the snapshot's disk-vda file was cut short" "$work/cutdisk.err" ||
	fail "boot's stderr does not name the cut disk-vda file: $(tail -c 300 "$work/cutdisk.err")"
[ ! -e "$sock" ] || fail "the VM's socket $sock was left behind"
tap "a disk-vda file cut short while its VM runs: the VM ends, exit 7, one line naming the cause"

tap_end
