#!/bin/sh
# run-jail-tests.sh - the jail and the quotas of a running VM, seen from the host as
# root (docs/security.md): every thread of the VM process without privileges and in
# its own namespaces, its root the jail directory, its cgroup's limits; a guest
# writing past --disk-quota gets I/O errors and goes on; one exhausting its RAM
# is ended by its own OOM killer and the VM goes on; killing the parent of a
# `mayfly run --approve` ends the VM and leaves nothing (process, the approver's
# spawner, jail directory, cgroup, socket); a kill -9 of a supervisor ends its VM
# and the next start sweeps its jail; snapshot create's VM is jailed. Report TAP.
#
# usage: run-jail-tests MAYFLY GUESTDIR JSONCHECK   (JSONCHECK unused: e2e-suite's shape)
#
# Needs root and a /dev/kvm that runs Linux: the nested harness's L1 (which mounts
# cgroup2 at /sys/fs/cgroup), or a real host. POSIX sh with busybox tools only.
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cat readlink ls cut id cmp stat chmod dd
[ $# -eq 3 ] || usage "run-jail-tests MAYFLY GUESTDIR JSONCHECK"
mayfly=$1
guestdir=$2
case_timeout=${E2E_CASE_TIMEOUT:-120}

need_mayfly
need_kvm
[ "$(id -u)" = 0 ] || bail "the jail tests need root (the hosting-provider case)"
export MAYFLY_GUEST_DIR="$guestdir"
tap_workdir jail-tests
export MAYFLY_CACHE="$work/cache"
bg=""
tap_cleanup() {
	[ -n "$bg" ] && kill -9 "$bg" 2>/dev/null
}

have_cgroup=0
grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts && have_cgroup=1

# A failed point: its reason on a line of its own, then the last lines of the
# last run's stderr and stdout.
tap_why=diag
tap_diag() {
	echo "# $why"
	tap_tail 15 "#   " "$work/err" "$work/out"
}

# status_field PID FIELD: the value of FIELD in /proc/PID/status, tabs as spaces.
status_field() {
	sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" 2>/dev/null | tr '\t' ' '
}

# wait_for_vm BGPID: wait until a mayfly process runs jailed (its uid dropped;
# one VM at a time here) and its command started (the --json "started" event),
# while BGPID lives; echoes the VM's pid.
wait_for_vm() {
	polls=$((case_timeout * 5))
	while [ "$polls" -gt 0 ]; do
		for v in $(named mayfly); do
			if [ "$(status_field "$v" Uid | cut -d' ' -f1)" != 0 ] &&
				grep -q started "$work/out" 2>/dev/null; then
				echo "$v"
				return 0
			fi
		done
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.2
		polls=$((polls - 1))
	done
	return 1
}

# leftovers: what a VM may leave behind (nothing), one word per kind.
leftovers() {
	left=""
	ls -d /run/mayfly/jail-* >/dev/null 2>&1 && left="$left jail-directory"
	ls -d /run/mayfly/jail-*.lock >/dev/null 2>&1 && left="$left lock"
	ls -d /sys/fs/cgroup/mayfly/vm-* >/dev/null 2>&1 && left="$left cgroup"
	for p in $(named mayfly) $(named mayfly-approve); do
		left="$left process:$p"
	done
	grep -q mayfly-jail /proc/mounts && left="$left mount"
	echo "$left"
}

# wait_clean: up to 20 s for every trace of a VM to go.
wait_clean() {
	i=0
	while [ -n "$(leftovers)" ] && [ $i -lt 100 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	[ -z "$(leftovers)" ] || fail "left behind:$(leftovers)"
}

# ---- the default snapshot (made once, as mayfly run does) -------------------

# Interrupted while it is being made: the run ends then, with the signal's
# code, and neither the snapshot nor a piece of it is left in the cache.
why=""
# A background job truncates its files only once it runs: empty them first,
# or the wait below may read the last point's output.
: >"$work/out"
: >"$work/err"
"$mayfly" run -- sleep 100 >"$work/out" 2>"$work/err" &
bg=$!
i=0
while ! grep -qs 'making the default snapshot' "$work/err" && [ $i -lt 300 ] && kill -0 "$bg" 2>/dev/null; do
	sleep 0.2
	i=$((i + 1))
done
grep -q 'making the default snapshot' "$work/err" || fail "no 'making the default snapshot' line"
sleep 2
kill -TERM "$bg"
i=0
while kill -0 "$bg" 2>/dev/null && [ $i -lt 150 ]; do
	sleep 0.2
	i=$((i + 1))
done
kill -0 "$bg" 2>/dev/null && fail "mayfly run still running 30 s after SIGTERM"
kill -9 "$bg" 2>/dev/null
wait "$bg"
rc=$?
bg=""
[ $rc = 143 ] || fail "SIGTERM while the default snapshot is made: exit $rc, want 143"
ls "$MAYFLY_CACHE"/snapshots/*/state >/dev/null 2>&1 && fail "a default snapshot was made all the same"
ls -d "$MAYFLY_CACHE"/snapshots/*.tmp-* >/dev/null 2>&1 && fail "a temporary directory is left in the cache"
wait_clean
tap "SIGTERM while the default snapshot is made ends the run (143); no snapshot, temporary directory, process, jail or cgroup left"

why=""
timeout -k 5 "$case_timeout" "$mayfly" run -- true >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "mayfly run -- true exited $rc"
tap "mayfly run as root, jailed by default, runs a command (exit 0)"

# ---- a running VM seen from the host ----------------------------------------

timeout -k 5 "$case_timeout" "$mayfly" run --json --uid 4321 --gid 4322 --cpu-quota 50 \
	--audit "$work/jail-audit.log" -- sleep 60 >"$work/out" 2>"$work/err" &
bg=$!
sup=""
vm=$(wait_for_vm "$bg") || fail "no jailed VM process with its command started"
[ -n "$vm" ] && sup=$(status_field "$vm" PPid)
[ -n "$sup" ] && [ "$(status_field "$sup" Uid | cut -d' ' -f1)" = 0 ] ||
	fail "the VM's parent '$sup' is not the supervisor"
# The --audit log is its writer's alone: a compromised VM cannot cut it back.
for p in $vm $sup; do
	for f in "/proc/$p/fd/"*; do
		[ "$(readlink "$f" 2>/dev/null)" = "$work/jail-audit.log" ] &&
			fail "process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-60)) holds the audit log open"
	done
done
tap "the VM runs in a process of its own, under a supervisor; neither holds the --audit log"

# The supervisor keeps only CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER and
# CAP_KILL (bits 0, 1, 3, 5), in every set; no_new_privs; its own filter.
if [ -n "$sup" ]; then
	for f in CapEff CapPrm CapBnd; do
		[ "$(status_field "$sup" $f)" = 000000000000002b ] ||
			fail "the supervisor's $f is $(status_field "$sup" $f), want 000000000000002b"
	done
	[ "$(status_field "$sup" CapAmb)" = 0000000000000000 ] || fail "the supervisor has ambient capabilities"
	[ "$(status_field "$sup" NoNewPrivs)" = 1 ] || fail "the supervisor's NoNewPrivs is not 1"
	[ "$(status_field "$sup" Seccomp)" = 2 ] || fail "the supervisor is not filtered (Seccomp: $(status_field "$sup" Seccomp))"
fi
tap "the supervisor keeps four capabilities (chown, dac_override, fowner, kill), no_new_privs and a seccomp filter"

if [ -n "$vm" ]; then
	threads=0
	for t in /proc/"$vm"/task/*; do
		tid=${t##*/}
		threads=$((threads + 1))
		s="$vm/task/$tid"
		[ "$(status_field "$s" NoNewPrivs)" = 1 ] || fail "thread $tid: NoNewPrivs $(status_field "$s" NoNewPrivs)"
		[ "$(status_field "$s" CapEff)" = 0000000000000000 ] || fail "thread $tid: CapEff $(status_field "$s" CapEff)"
		[ "$(status_field "$s" CapPrm)" = 0000000000000000 ] || fail "thread $tid: CapPrm $(status_field "$s" CapPrm)"
		[ "$(status_field "$s" CapBnd)" = 0000000000000000 ] || fail "thread $tid: CapBnd $(status_field "$s" CapBnd)"
		[ "$(status_field "$s" Uid)" = "4321 4321 4321 4321" ] || fail "thread $tid: Uid $(status_field "$s" Uid)"
		[ "$(status_field "$s" Gid)" = "4322 4322 4322 4322" ] || fail "thread $tid: Gid $(status_field "$s" Gid)"
	done
	[ $threads -ge 4 ] || fail "only $threads thread(s): the VM is not running"
	tap "every thread of the VM: NoNewPrivs 1, no capabilities, uid/gid 4321/4322 ($threads threads)"

	for ns in mnt pid net ipc uts cgroup; do
		[ "$(readlink "/proc/$vm/ns/$ns")" != "$(readlink "/proc/self/ns/$ns")" ] ||
			fail "the VM shares our $ns namespace"
	done
	nspid=$(status_field "$vm" NSpid)
	[ "${nspid##* }" = 1 ] || fail "NSpid '$nspid': not PID 1 of its own namespace"
	tap "the VM has its own mount, PID (as PID 1), net, IPC, UTS and cgroup namespaces"

	# Its root: the empty jail directory (a sanitizer build keeps its own /proc).
	entries=$(ls -A "/proc/$vm/root/" 2>&1 | tr '\n' ' ')
	case "$entries" in
	"" | "proc ") ;;
	*) fail "the VM's root holds: $entries" ;;
	esac
	jails=0
	for j in /run/mayfly/jail-*; do
		case $j in *.lock) ;; *) [ -e "$j" ] && jails=$((jails + 1)) ;; esac
	done
	[ "$jails" = 1 ] || fail "no jail directory under /run/mayfly"
	[ "$(ls -d /run/mayfly/jail-*.lock 2>/dev/null | wc -l)" = 1 ] || fail "no lease (lock file) beside the jail directory"
	[ ! -e "/proc/$vm/root/dev/kvm" ] || fail "/dev/kvm is in the jail"
	[ ! -e "/proc/$vm/root/bin" ] || fail "the host's /bin is in the jail"
	tap "the VM's root is the empty jail directory (/proc/PID/root: '${entries% }')"

	if [ $have_cgroup = 1 ]; then
		cg=$(sed -n 's/^0:://p' "/proc/$vm/cgroup")
		case $cg in
		/mayfly/vm-*) ;;
		*) fail "the VM's cgroup is '$cg'" ;;
		esac
		d=/sys/fs/cgroup$cg
		# 256 MiB of RAM + 512 MiB of overlay (--disk-quota default) + 256 MiB for the VMM.
		[ "$(cat "$d/memory.max" 2>/dev/null)" = $(((256 + 512 + 256) * 1048576)) ] ||
			fail "memory.max $(cat "$d/memory.max" 2>&1)"
		[ "$(cat "$d/pids.max" 2>/dev/null)" = 17 ] || fail "pids.max $(cat "$d/pids.max" 2>&1)"
		[ "$(cat "$d/cpu.max" 2>/dev/null)" = "50000 100000" ] || fail "cpu.max $(cat "$d/cpu.max" 2>&1)"
		tap "the VM's cgroup: memory.max = RAM + overlay + 256 MiB, pids.max 17, cpu.max from --cpu-quota 50"
	else
		tap_skip "" "no cgroup2 at /sys/fs/cgroup"
	fi
fi

kill -TERM "$sup" 2>/dev/null
wait "$bg"
rc=$?
[ $rc = 143 ] || fail "SIGTERM to the supervisor: exit $rc, want 143 (the command's own death by it)"
bg=""
wait_clean
tap "SIGTERM reaches the command through the supervisor; nothing is left behind"

# ---- the parent of a mayfly run dies ----------------------------------------

: >"$work/out"
sh -c "'$mayfly' run --json --approve true -- sleep 100 >'$work/out' 2>'$work/err'; echo ended" &
bg=$!
vm=$(wait_for_vm "$bg") || fail "no jailed VM came up"
sup=$(children_of "$bg" | head -n 1)
[ -n "$(named mayfly-approve)" ] || fail "no approver spawner (mayfly-approve) beside the VM"
[ -n "$vm" ] && [ "$(status_field "$vm" PPid)" = "$sup" ] || fail "the VM is not sh's mayfly's child"
kill -9 "$bg"
wait "$bg" 2>/dev/null
bg=""
wait_clean
tap "killing the parent of a mayfly run --approve ends the VM: no process (VM, approver spawner), jail directory, cgroup or mount left"

# ---- a SIGKILL of the supervisor ---------------------------------------------

: >"$work/out"
timeout -k 5 "$case_timeout" "$mayfly" run --json -- sleep 100 >"$work/out" 2>"$work/err" &
bg=$!
vm=$(wait_for_vm "$bg") || fail "no jailed VM came up"
sup=""
[ -n "$vm" ] && sup=$(status_field "$vm" PPid)
echo "# killing supervisor '$sup' of VM '$vm' (bg $bg)"
if [ -n "$sup" ]; then
	kill -9 "$sup"
	[ "$sup" = "$bg" ] && wait "$bg" 2>/dev/null
	bg=""
	i=0
	while kill -0 "$vm" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	if kill -0 "$vm" 2>/dev/null; then
		fail "the VM outlived its supervisor's SIGKILL"
		kill -9 "$vm" 2>/dev/null   # the next points need a quiet host
	fi
	# What the killed supervisor could not remove is there until the next mayfly.
	case "$(leftovers)" in
	*jail-directory*) ;;
	*) fail "nothing was left to sweep:$(leftovers)" ;;
	esac
	echo "# VM gone: $(kill -0 "$vm" 2>/dev/null && echo no || echo yes); left:$(leftovers)"
	timeout -k 5 60 "$mayfly" run -- true >"$work/out" 2>"$work/err"
	rc=$?
	echo "# the next run exited $rc; left:$(leftovers)"
	[ $rc = 0 ] || fail "the next mayfly run exited $rc"
	wait_clean
fi
tap "kill -9 of a running VM's supervisor: the VM dies; the next mayfly run removes its jail directory and cgroup"

# ---- --disk-quota -----------------------------------------------------------

timeout -k 5 "$case_timeout" "$mayfly" run --disk-quota 16M -- sh -c \
	'dd if=/dev/zero of=/root/big bs=1M count=64 conv=fsync 2>/dev/null; echo "dd=$?"; rm -f /root/big; echo alive; exit 3' \
	>"$work/out" 2>"$work/err"
rc=$?
[ $rc = 3 ] || fail "exit $rc, want the command's 3"
grep -qx 'dd=0' "$work/out" && fail "64 MiB went through a 16 MiB --disk-quota"
grep -q '^dd=[1-9]' "$work/out" || fail "no failed dd"
grep -qx alive "$work/out" || fail "the guest did not go on after the I/O errors"
tap "a guest writing past --disk-quota 16M gets I/O errors and goes on (exit 3 from its command)"
wait_clean

# ---- guest RAM exhausted -----------------------------------------------------

# busybox tail keeps a line that never ends: it grows until the guest's own OOM
# killer ends it. Guest RAM is a fixed mapping the host sized at start, so the
# VM and the host go on.
timeout -k 5 "$case_timeout" "$mayfly" run --cold --mem 64 -- sh -c \
	'tail /dev/zero >/dev/null; echo "tail=$?"; echo alive' >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "exit $rc, want 0 (the shell goes on once its tail is killed)"
grep -qx 'tail=137' "$work/out" || fail "the guest's OOM killer did not end tail (want tail=137)"
grep -qx alive "$work/out" || fail "the guest did not go on"
tap "a guest exhausting its RAM (--mem 64, tail /dev/zero): its OOM killer ends the command; the VM and the host go on"
wait_clean

# ---- files and snapshots through the jail ------------------------------------

head -c 300000 /dev/urandom >"$work/put.bin" 2>/dev/null || dd if=/dev/urandom of="$work/put.bin" bs=1000 count=300 2>/dev/null
chmod 600 "$work/put.bin"
timeout -k 5 "$case_timeout" "$mayfly" run --put "$work/put.bin:/root/in.bin" \
	--get "/root/out.bin:$work/got.bin" -- cp /root/in.bin /root/out.bin >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "exit $rc"
cmp -s "$work/put.bin" "$work/got.bin" || fail "--get did not bring back what --put took in"
[ "$(stat -c %u "$work/got.bin" 2>/dev/null)" = 0 ] || fail "--get's file is not the caller's (uid $(stat -c %u "$work/got.bin"))"
ls "$work"/.got.bin.mayfly-* >/dev/null 2>&1 && fail "a temporary file of --get is left"
tap "run --put of a 0600 root file and --get into root's 0700 directory, through the jail"

snap=$work/snap
timeout -k 5 "$case_timeout" "$mayfly" snapshot create --setup 'echo jailed-restore >/root/v' \
	--out "$snap" >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "snapshot create exited $rc"
timeout -k 5 "$case_timeout" "$mayfly" run --snapshot "$snap" -- cat /root/v >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "run --snapshot exited $rc"
grep -qx jailed-restore "$work/out" || fail "the restored VM lacks the setup's file"
tap "snapshot create, then run --snapshot restores it jailed"

# snapshot create's VM is jailed too: seen while its setup command runs.
: >"$work/out"
: >"$work/err"
timeout -k 5 "$case_timeout" "$mayfly" snapshot create --uid 4331 --gid 4332 \
	--setup 'echo started >&2; sleep 6' --out "$work/snap2" >"$work/out" 2>"$work/err" &
bg=$!
vm=""
i=0
while [ -z "$vm" ] && [ $i -lt $((case_timeout * 5)) ] && kill -0 "$bg" 2>/dev/null; do
	for v in $(named mayfly); do
		[ "$(status_field "$v" Uid | cut -d' ' -f1)" = 4331 ] && grep -q started "$work/err" && vm=$v
	done
	sleep 0.2
	i=$((i + 1))
done
if [ -n "$vm" ]; then
	threads=0
	for t in /proc/"$vm"/task/*; do
		s="$vm/task/${t##*/}"
		threads=$((threads + 1))
		[ "$(status_field "$s" NoNewPrivs)" = 1 ] || fail "thread ${t##*/}: NoNewPrivs $(status_field "$s" NoNewPrivs)"
		[ "$(status_field "$s" CapEff)" = 0000000000000000 ] || fail "thread ${t##*/}: CapEff $(status_field "$s" CapEff)"
		[ "$(status_field "$s" Uid)" = "4331 4331 4331 4331" ] || fail "thread ${t##*/}: Uid $(status_field "$s" Uid)"
		[ "$(status_field "$s" Seccomp)" = 2 ] || fail "thread ${t##*/}: Seccomp $(status_field "$s" Seccomp)"
	done
	grep -q mayfly-snapshot /proc/"$vm"/task/*/comm || fail "no thread named mayfly-snapshot"
	for ns in mnt pid net ipc uts cgroup; do
		[ "$(readlink "/proc/$vm/ns/$ns")" != "$(readlink "/proc/self/ns/$ns")" ] ||
			fail "the snapshot's VM shares our $ns namespace"
	done
	echo "# snapshot create: the VM process $vm, $threads threads"
else
	fail "no jailed snapshot VM (uid 4331) while its setup ran"
fi
wait "$bg"
rc=$?
bg=""
[ $rc = 0 ] || fail "snapshot create exited $rc"
[ "$(stat -c %u "$work/snap2/state" 2>/dev/null)" = 0 ] || fail "the snapshot's state is not ours: uid $(stat -c %u "$work/snap2/state" 2>&1)"
[ "$(stat -c %u "$work/snap2" 2>/dev/null)" = 0 ] || fail "the snapshot directory is not ours"
ls -d "$work"/snap2.tmp-* >/dev/null 2>&1 && fail "a temporary directory is left beside --out"
ls -d "$MAYFLY_CACHE"/snapshots/*.tmp-* >/dev/null 2>&1 && fail "a temporary directory is left in the cache"
wait_clean
tap "snapshot create runs its VM jailed (uid 4331, no caps, NoNewPrivs, Seccomp 2, own namespaces); the snapshot is ours"

sock=$work/vm.sock
"$mayfly" boot -v --snapshot "$snap" --vsock "$sock" </dev/null >"$work/boot.out" 2>"$work/boot.err" &
bg=$!
# boot --snapshot freshens its guest's agent (clock, entropy) itself before
# the VM is anyone's: exec waits for that line (an exec that reaches the
# agent first is refused, "FRESHEN comes first").
i=0
while ! grep -qs 'guest agent ready' "$work/boot.err" && [ $i -lt $((case_timeout * 5)) ] &&
	kill -0 "$bg" 2>/dev/null; do
	sleep 0.2
	i=$((i + 1))
done
grep -q 'guest agent ready' "$work/boot.err" ||
	fail "boot --snapshot's agent not ready after $((i / 5)) s: $(tail -n 3 "$work/boot.err" | tr '\n' ' ')"
timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$sock" -- cat /root/v >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "exec exited $rc"
grep -qx jailed-restore "$work/out" || fail "exec did not reach the restored VM"
echo cp-payload >"$work/cp-in.txt"
timeout -k 5 "$case_timeout" "$mayfly" cp --vsock "$sock" "$work/cp-in.txt" :/root/cp.txt >>"$work/out" 2>>"$work/err" &&
	timeout -k 5 "$case_timeout" "$mayfly" cp --vsock "$sock" :/root/cp.txt "$work/cp-out.txt" >>"$work/out" 2>>"$work/err" ||
	fail "mayfly cp failed"
cmp -s "$work/cp-in.txt" "$work/cp-out.txt" || fail "mayfly cp round trip changed the file"
kill -TERM "$bg"
wait "$bg"
rc=$?
bg=""
[ $rc = 143 ] || fail "boot exited $rc on SIGTERM, want 143: $(tail -n 3 "$work/boot.err" | tr '\n' ' ')"
[ -e "$sock" ] && fail "the socket $sock is left behind"
wait_clean
tap "boot --snapshot --vsock jailed: exec and cp reach it; SIGTERM leaves no socket, jail or cgroup"

# ---- --no-jail --------------------------------------------------------------

timeout -k 5 "$case_timeout" "$mayfly" run --no-jail -- true >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 0 ] || fail "exit $rc"
grep -q -- '--no-jail' "$work/err" || fail "no warning line about --no-jail"
tap "--no-jail runs unjailed and says so"

tap_end
