#!/bin/sh
# run-pause-tests.sh - live pause, resume and fork of a running `mayfly boot --vsock`
# VM (issue 13), as root (jailed, the default): a file and a background process
# started before a pause are there after the resume, twice in a row (pause ->
# resume -> pause -> resume); a fork into 3 children: each sees the parent's files,
# writes its own, sees no other's, and the parent goes on; a pause is refused
# (busy) while an exec runs, and for a DIR that is not empty, no VM, or a socket
# that is not a mayfly control socket; nothing left behind. Measures pause and
# resume latency, fork time per child and PSS per idle fork child (TAP comments).
#
# usage: run-pause-tests MAYFLY GUESTDIR TOOL   (TOOL unused: e2e-suite's shape)
#
# Needs root and a /dev/kvm that runs Linux (the nested harness's L1, or a real
# host). POSIX sh with busybox tools only. Exit: 0 all passed, 1 a point failed,
# 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cat ls cut id stat awk
[ $# -eq 3 ] || usage "run-pause-tests MAYFLY GUESTDIR TOOL"
mayfly=$1
guestdir=$2
case_timeout=${E2E_CASE_TIMEOUT:-120}

need_mayfly
need_kvm
[ "$(id -u)" = 0 ] || bail "the pause tests run as root (jailed VMs, the service's case)"
rootfs=$guestdir/rootfs.ext4
[ -r "$rootfs" ] || bail "$rootfs is missing (tools/build-guest)"
export MAYFLY_GUEST_DIR="$guestdir"
tap_workdir pause-tests
export MAYFLY_CACHE="$work/cache"
vms=""
tap_cleanup() {
	for v in $vms; do
		kill -9 "$v" 2>/dev/null
	done
}

# A failed point: its reason on a line of its own, then the last lines of the
# last run's stderr and stdout and of each VM's stderr, each with its file's name.
tap_why=diag
tap_diag() {
	echo "# $why"
	tap_tail -n 8 "#   " "$work/err" "$work/out" "$work"/boot-*.err
}

# now_ms: milliseconds since boot (10 ms steps: /proc/uptime).
now_ms() {
	read -r up _ </proc/uptime
	echo $(( ${up%.*} * 1000 + $(echo "${up#*.}" | sed 's/^0*\([0-9]\)/\1/') * 10 ))
}

# boot NAME ARGS...: a VM in the background on $work/NAME.sock; its pid in $vm.
boot() {
	name=$1
	shift
	"$mayfly" boot -v --vsock "$work/$name.sock" "$@" </dev/null >"$work/boot-$name.out" \
		2>"$work/boot-$name.err" &
	vm=$!
	vms="$vms $vm"
}

# x NAME CMD: run CMD (sh -c) in VM NAME; stdout in $work/out, exit code in $rc.
x() {
	timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$work/$1.sock" -- sh -c "$2" \
		</dev/null >"$work/out" 2>"$work/err"
	rc=$?
}

# ready NAME: wait until VM NAME answers an exec (it boots or restores); the
# time it took from $t0 in $ready_ms.
ready() {
	x "$1" true
	ready_ms=$(( $(now_ms) - t0 ))
	[ "$rc" = 0 ] || fail "VM $1 never answered (exec exited $rc)"
}

# pause NAME DIR [fork]: mayfly pause (or fork) of VM NAME into DIR; $rc, $took_ms.
pause() {
	op=${3:-pause}
	s=$(now_ms)
	timeout -k 5 "$case_timeout" "$mayfly" "$op" -v --vsock "$work/$1.sock" --out "$2" \
		</dev/null >"$work/out" 2>"$work/err"
	rc=$?
	took_ms=$(( $(now_ms) - s ))
	sed -n 's/.*info: \(paused\|forked\) into .*; /# /p' "$work/err"
}

# kib PID FIELD: a smaps_rollup field of PID in KiB.
kib() {
	sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/smaps_rollup" 2>/dev/null
}

# ---- pause -> resume -> pause -> resume -------------------------------------

t0=$(now_ms)
boot a --rootfs "$rootfs" --mem 128
a=$vm
ready a
x a 'echo kept-across-pauses >/root/keep && setsid sleep 1000 </dev/null >/dev/null 2>&1 &
sleep 0.2; pidof sleep >/root/bgpid; cat /root/bgpid'
bg=$(tr -d '\r\n' <"$work/out")
[ "$rc" = 0 ] && [ -n "$bg" ] || fail "could not start the background process (exit $rc)"
tap "a cold VM with a file written and a background process (pid $bg) started"

pause a "$work/p1"
pause1=$took_ms
want_rc 0
wait "$a"
arc=$?
[ "$arc" = 0 ] || fail "the paused VM's mayfly boot exited $arc, want 0"
# One line for the one event (-v): "vm stopped: paused into 'DIR' (exit 0)".
[ "$(grep -c "paused into '$work/p1'" "$work/boot-a.err")" = 1 ] ||
	fail "not one 'paused into DIR' line from mayfly boot: $(grep "paused into" "$work/boot-a.err")"
for f in memory state disk-vda; do
	[ -s "$work/p1/$f" ] || fail "the snapshot lacks $f"
done
[ -e "$work/a.sock" ] && fail "the vsock socket is left behind"
[ -e "$work/a.sock.ctl" ] && fail "the control socket is left behind"
tap "mayfly pause: exit 0 once the snapshot is whole and the VM is gone ($pause1 ms)"

t0=$(now_ms)
boot b --snapshot "$work/p1"
b=$vm
ready b
resume1=$ready_ms
x b "cat /root/keep; cat /proc/$bg/comm"
grep -qx kept-across-pauses "$work/out" || fail "the file written before the pause is gone"
grep -qx sleep "$work/out" || fail "the background process $bg is gone after the resume"
tap "resumed: the file and the background process are there ($resume1 ms to the first exec)"

x b 'echo second >>/root/keep'
pause b "$work/p2"
pause2=$took_ms
want_rc 0
wait "$b"
t0=$(now_ms)
boot c --snapshot "$work/p2"
ready c
resume2=$ready_ms
x c "cat /root/keep; cat /proc/$bg/comm"
grep -qx second "$work/out" && grep -qx kept-across-pauses "$work/out" ||
	fail "the files written before the two pauses are not all there"
grep -qx sleep "$work/out" || fail "the background process is gone after the second resume"
tap "a second pause and resume keep files and processes ($pause2 ms, $resume2 ms)"

# ---- busy, and the refusals --------------------------------------------------

"$mayfly" exec --vsock "$work/c.sock" -- sleep 6 </dev/null >/dev/null 2>&1 &
slow=$!
sleep 2
pause c "$work/busy"
want_rc 5
grep -q busy "$work/err" || fail "no 'busy' line"
[ -e "$work/busy" ] && fail "a refused pause left $work/busy"
wait "$slow"
src=$?
[ "$src" = 0 ] || fail "the exec that ran during the refused pause exited $src"
x c true
[ "$rc" = 0 ] || fail "the VM does not answer after the refused pause"
tap "a pause while an exec runs is refused (exit 5, busy); the exec and the VM go on"

mkdir "$work/full" && echo x >"$work/full/f"
pause c "$work/full"
want_rc 4
tap "a pause into a DIR that is not empty: exit 4"
pause nosuch "$work/nosuch"
want_rc 3
tap "a pause of no VM: exit 3"
ln -s "$work/c.sock" "$work/fake.sock.ctl"
pause fake "$work/fake-out"
want_rc 3
grep -q "not a mayfly control socket" "$work/err" || fail "no 'not a mayfly control socket' line"
tap "a socket that is not a mayfly control socket: exit 3, one line"

# ---- fork into 3 children -----------------------------------------------------

x c 'echo from-parent >/root/parent-file'
pause c "$work/f" fork
forkms=$took_ms
want_rc 0
x c 'cat /root/parent-file && echo parent-after-fork >/root/after'
[ "$rc" = 0 ] || fail "the parent does not answer after the fork"
tap "mayfly fork: exit 0 and the parent goes on ($forkms ms)"

kids=""
t0=$(now_ms)
for i in 1 2 3; do
	boot "k$i" --snapshot "$work/f"
	kids="$kids $vm"
done
for i in 1 2 3; do
	ready "k$i"
done
allkids_ms=$ready_ms
for i in 1 2 3; do
	x "k$i" "cat /root/parent-file && echo child-$i >/root/child-$i"
	grep -qx from-parent "$work/out" || fail "child $i does not see the parent's file"
done
for i in 1 2 3; do
	x "k$i" 'ls /root; cat /root/keep'
	for j in 1 2 3; do
		if [ "$j" = "$i" ]; then
			grep -qx "child-$j" "$work/out" || fail "child $i lost its own file"
		else
			grep -qx "child-$j" "$work/out" && fail "child $i sees child $j's file"
		fi
	done
	grep -qx after "$work/out" && fail "child $i sees a file the parent wrote after the fork"
done
x c 'ls /root'
grep -q child- "$work/out" && fail "the parent sees a child's file"
tap "3 children of the fork: each sees the parent's files and only its own ($allkids_ms ms to all 3 ready)"

# PSS of the idle children's VM processes.
sleep 1
tot=0
priv=0
cnt=0
for k in $kids; do
	p=$(children_of "$k" | head -n 1)   # the jailed VM process of supervisor $k
	v=$(kib "${p:-0}" Pss)
	pc=$(kib "${p:-0}" Private_Clean)
	pd=$(kib "${p:-0}" Private_Dirty)
	[ -n "$v" ] && tot=$((tot + v)) && priv=$((priv + ${pc:-0} + ${pd:-0})) && cnt=$((cnt + 1))
done
[ "$cnt" = 3 ] || fail "PSS of $cnt of 3 children read"
echo "# pause: $pause1 ms, $pause2 ms; resume to the first exec: $resume1 ms, $resume2 ms"
echo "# fork: $forkms ms; 3 children ready in $allkids_ms ms ($((allkids_ms / 3)) ms per child, started together)"
[ "$cnt" -gt 0 ] && echo "# per idle fork child (128 MiB guest, this build): PSS $((tot / cnt)) KiB, private $((priv / cnt)) KiB"
sed -n 's/.*info: control socket: /# VM side: /p' "$work"/boot-*.err
tap "PSS of the idle fork children read"

# ---- nothing left behind ------------------------------------------------------

for v in $vms; do
	kill -TERM "$v" 2>/dev/null
done
for v in $vms; do
	wait "$v" 2>/dev/null
done
vms=""
rm -f "$work/fake.sock.ctl"
i=0
left="x"
while [ -n "$left" ] && [ $i -lt 100 ]; do
	left=""
	[ -n "$(named mayfly)" ] && left="$left process"
	ls -d /run/mayfly/jail-* >/dev/null 2>&1 && left="$left jail-directory"
	ls -d /sys/fs/cgroup/mayfly/vm-* >/dev/null 2>&1 && left="$left cgroup"
	ls "$work"/*.sock "$work"/*.sock.ctl >/dev/null 2>&1 && left="$left socket"
	ls -d "$work"/*.tmp-* >/dev/null 2>&1 && left="$left temporary-directory"
	[ -n "$left" ] && sleep 0.2
	i=$((i + 1))
done
[ -z "$left" ] || fail "left behind:$left"
tap "nothing left behind: process, jail directory, cgroup, socket, temporary file"

tap_end
