#!/bin/sh
# run-kvm-tests.sh - boot each tiny test guest under mayfly on this host's /dev/kvm and report TAP.
#
# usage: run-kvm-tests MAYFLY GUESTDIR [SNAPSHOT_ROUNDTRIP [VM_CYCLES]]
#   MAYFLY    the mayfly binary (or a script that runs it)
#   GUESTDIR  the directory with the guests' NAME.elf files (build/tests/kvm/guests)
#   SNAPSHOT_ROUNDTRIP  the snapshot-roundtrip test program (build/tests/kvm/);
#             its cases are left out without it
#   VM_CYCLES the vm-cycles test program (build/tests/kvm/); its case is left
#             out without it
#
# Environment: KVM_CASE_TIMEOUT  seconds allowed for one mayfly run (default 60).
# Output: TAP on stdout; a failing point is followed by "# " lines with the
# command, its exit status, stdout and stderr. Exit status: 0 all passed,
# 1 a point failed, 2 usage, 3 could not run at all ("Bail out!").
#
# POSIX sh with busybox tools only: it also runs inside the nested harness's
# minimal Linux. Every mayfly run is bounded by timeout(1).

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head cut tr wc mkfifo mktemp sleep rm sha256sum cp dd mkdir
[ $# -ge 2 ] && [ $# -le 4 ] || usage "run-kvm-tests MAYFLY GUESTDIR [SNAPSHOT_ROUNDTRIP [VM_CYCLES]]"
mayfly=$1
guests=$2
snaptest=${3:-}
cycles=${4:-}
case_timeout=${KVM_CASE_TIMEOUT:-60}

need_mayfly
[ -z "$snaptest" ] || [ -x "$snaptest" ] || bail "snapshot test $snaptest is missing or not executable"
[ -z "$cycles" ] || [ -x "$cycles" ] || bail "vm-cycles test $cycles is missing or not executable"
[ -d "$guests" ] || bail "guest directory $guests is missing"
need_kvm kvm-suite

tap_workdir kvm-tests
reader=""
# shellcheck disable=SC2317 # called by the trap
tap_cleanup() {
	[ -n "$reader" ] && kill "$reader" 2>/dev/null
}

# ---- running mayfly ---------------------------------------------------------

# State of the last run: its command line, exit status, and stdout/stderr in
# $work/out and $work/err.
cmd=""
rc=0
diag_shown=0

# guest_missing GUEST: true (and a failed run recorded) when there is no such guest.
guest_missing() {
	[ -f "$guests/$1.elf" ] && return 1
	: >"$work/out"
	echo "run-kvm-tests: $guests/$1.elf does not exist" >"$work/err"
	rc=127
	return 0
}

# boot GUEST [ARGS...]: boot GUESTDIR/GUEST.elf with stdin from /dev/null.
boot() {
	guest=$1
	shift
	cmd="mayfly boot --kernel $guest.elf${*:+ $*}"
	diag_shown=0
	guest_missing "$guest" && return
	timeout -k 5 "$case_timeout" "$mayfly" boot --kernel "$guests/$guest.elf" "$@" \
		</dev/null >"$work/out" 2>"$work/err"
	rc=$?
}

# boot_with_input TEXT GUEST [ARGS...]: the same with TEXT piped into stdin.
boot_with_input() {
	input=$1
	guest=$2
	shift 2
	cmd="printf '$input' | mayfly boot --kernel $guest.elf${*:+ $*}"
	diag_shown=0
	guest_missing "$guest" && return
	printf '%s' "$input" | timeout -k 5 "$case_timeout" \
		"$mayfly" boot --kernel "$guests/$guest.elf" "$@" >"$work/out" 2>"$work/err"
	rc=$?
}

# boot_unread_stdout GUEST [ARGS...]: the same with stdout a pipe whose reader
# never reads, so it fills up; stdout is not captured.
boot_unread_stdout() {
	guest=$1
	shift
	cmd="mayfly boot --kernel $guest.elf${*:+ $*} >FIFO-NEVER-READ"
	diag_shown=0
	guest_missing "$guest" && return
	rm -f "$work/fifo"
	mkfifo "$work/fifo" || bail "mkfifo failed"
	# shellcheck disable=SC2217 # the reader holds the pipe open and never reads
	sleep $((case_timeout + 30)) <"$work/fifo" &
	reader=$!
	timeout -k 5 "$case_timeout" "$mayfly" boot --kernel "$guests/$guest.elf" "$@" \
		</dev/null >"$work/fifo" 2>"$work/err"
	rc=$?
	kill "$reader" 2>/dev/null
	wait "$reader" 2>/dev/null
	reader=""
	echo "(not captured: nobody read it)" >"$work/out"
}

# snap ARGS...: run the snapshot-roundtrip program.
snap() {
	cmd="snapshot-roundtrip $*"
	diag_shown=0
	timeout -k 5 "$case_timeout" "$snaptest" "$@" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
}

# ---- checks and TAP (tap.sh) -------------------------------------------------

tap_reasons=all   # a failed point names every check that failed
tap_timeouts="got exit"

want_out() {
	grep -qF -- "$1" "$work/out" || fail "stdout lacks \"$1\""
}

# want_err_lines_at_most MAX FIXED-STRING
want_err_lines_at_most() {
	count=$(grep -ciF -- "$2" "$work/err")
	[ "$count" -le "$1" ] || fail "$count stderr lines mention $2, want at most $1"
}

# A failed point shows its run (once): the command, its exit status, and the
# first 40 lines of its stdout and stderr.
show() {
	head -n 40 "$1" | tap_printable
}
tap_diag() {
	tap_run_diag
}

# ---- the cases --------------------------------------------------------------

boot hello-pvh
want_out "hello from pvh"
tap "serial output reaches host (PVH guest on COM1)"
want_out "start info ok"
tap "PVH entry gets hvm_start_info (magic 0x336ec578) in EBX"
want_rc 0
tap "guest reset through the i8042 exits 0"

boot hello-pvh -v
want_rc 0
want_err_re "boot timer: guest ready after [0-9]+ us"
tap "boot timer reported with -v"

boot boot-timer-only -v
want_rc 0
want_err_re "boot timer: guest ready after [0-9]+ us"
tap "boot timer reported for a guest that prints nothing"

boot hello-pvh64
want_out "hello from pvh"
want_out "start info ok"
want_rc 0
tap "ELF64 with a PVH note (8-byte, like Linux 6.1) takes the 32-bit PVH entry"

boot hello-64
want_out "hello from long mode"
want_out "long mode ok"
tap "ELF64 without a PVH note is entered in long mode"
want_out "rsi ok"
tap "64-bit entry gets the zero page 0x7000 in RSI"
want_rc 0
tap "64-bit guest reset exits 0"

boot triple-fault
want_out "about to fault"
want_rc 6
tap "triple fault exits 6"
want_err_re "triple.?fault"
tap "triple fault reported on stderr"

boot unclaimed
want_out "unclaimed reads ff"
tap "unclaimed port and MMIO reads return all ones"
want_out "still alive"
want_rc 0
tap "guest survives unclaimed port and MMIO accesses"

# The guest makes each access three times; mayfly logs an address once (a
# read and a write line at most), not once per access.
boot unclaimed -v
want_rc 0
want_err_lines_at_most 2 9999
want_err_lines_at_most 2 d8000000
tap "unclaimed accesses are logged once, not per access"

for cpus in 1 2 4; do
	boot smp --cpus "$cpus"
	want_out "cpu0 up"
	k=1
	while [ "$k" -lt "$cpus" ]; do
		want_out "cpu$k up"
		k=$((k + 1))
	done
	want_out "cpus up: $cpus"
	want_rc 0
	tap "--cpus $cpus: BSP starts the APs with INIT-SIPI-SIPI, cpus up: $cpus"
	want_out "mptable cpus: $cpus"
	tap "--cpus $cpus: the MP table's CPU count is $cpus"
done

boot_with_input abcq echo --console
want_out "ready"
want_out "abc"
want_out "bye"
want_rc 0
tap "stdin reaches the guest's COM1 with --console"

# Every guest above polls COM1; this one takes IRQ 4 through the IOAPIC, as
# Linux's console does, for THRE and for a byte from stdin.
boot_with_input x uart-irq --console
want_out "armed"
want_out "thre irq ok"
tap "COM1's THRE interrupt reaches the guest through the IOAPIC (OUT2 set)"
want_out "rx irq: x"
want_out "irqs: 2"
want_rc 0
tap "COM1's receive interrupt delivers stdin's byte, one interrupt per cause"

boot first-byte
want_line "X"
want_rc 0
tap "first-byte guest prints X and exits 0"

# 144 KiB of output into a pipe nobody reads: more than the pipe and mayfly's
# 64 KiB output buffer hold.
boot_unread_stdout flood -v
want_err_re "boot timer: guest ready after [0-9]+ us"
tap "unread stdout does not stall the guest (output flood)"
want_rc 0
tap "mayfly exits on guest reset while stdout is unread"

# ---- snapshots: the vmm/snapshot modules on raw KVM -------------------------

if [ -n "$snaptest" ]; then
	snapdir=$work/snap
	mkdir -p "$snapdir" || bail "mkdir failed"
	snap save "$snapdir"
	want_rc 0
	want_out "saved mid-run"
	tap "snapshot: a counting guest paused mid-run is saved (vCPU, VM state, sparse memory)"
	sum_before=$(sha256sum "$snapdir/memory" 2>/dev/null | cut -d' ' -f1)

	snap restore "$snapdir"
	want_rc 0
	want_out "restored twice:"
	want_out "clone 1: continued from"
	want_out "clone 2: continued from"
	tap "snapshot: restored twice, both continue from the saved counter, not from 0"
	want_out "clones independent"
	tap "snapshot: the two restored VMs diverge; neither sees the other's memory writes"
	want_out "guest state restored: xmm1 0x1234abcd, SYSENTER_CS 0x5a5a, LAPIC SVR 0x1ff, PIC IMR 0xfb"
	tap "snapshot: FPU, MSR, LAPIC and PIC state come back as the guest set them"
	sum_after=$(sha256sum "$snapdir/memory" 2>/dev/null | cut -d' ' -f1)
	[ -n "$sum_before" ] && [ "$sum_before" = "$sum_after" ] ||
		fail "memory sha256 ${sum_before:-none} before, ${sum_after:-none} after"
	tap "snapshot: the memory file is unchanged by the restored VMs (sha256)"

	# One byte of the vCPU section flipped: refused before any guest code runs.
	cp "$snapdir/state" "$snapdir/state.good"
	size=$(wc -c <"$snapdir/state")
	printf 'X' | dd of="$snapdir/state" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
	snap restore "$snapdir"
	want_rc 2
	want_err_re "crc32 mismatch in section vcpu 0"
	tap "snapshot: a corrupt state file is refused with the section named"
fi

# ---- create/destroy cycles: nothing left behind ---------------------------

# 1,000 tiny-guest VMs one after another, and 50 alive at once, in one
# process: descriptors, threads, heap, mappings and resident memory as before.
# AddressSanitizer's quarantine would hold freed memory and look like
# growth: off for this run (nothing else changes on a build without it).
if [ -n "$cycles" ]; then
	cmd="vm-cycles $guests/boot-timer-only.elf 1000 50"
	diag_shown=0
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0" \
		timeout -k 5 "$case_timeout" "$cycles" "$guests/boot-timer-only.elf" 1000 50 \
		</dev/null >"$work/out" 2>"$work/err"
	rc=$?
	want_rc 0
	want_out "1000 VMs built, run and destroyed one after another"
	want_out "50 VMs alive at once"
	want_line "vm-cycles: ok"
	tap "1,000 VMs built and destroyed in turn, and 50 at once, leave no fd, thread, mapping or memory behind"
	sed -n -e 's/^vm-cycles: after/# vm-cycles: after/p' \
		-e 's/^vm-cycles: new mapping/# vm-cycles: new mapping/p' "$work/out"
fi

tap_end
