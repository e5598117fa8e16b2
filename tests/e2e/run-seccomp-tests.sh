#!/bin/sh
# run-seccomp-tests.sh - every thread of a running mayfly is confined by its seccomp
# filter, the VM still works (boot, run, snapshot create and restore), --no-seccomp
# leaves them unfiltered, and a thread that breaks its filter ends the process with
# one line naming its role. Prints TAP.
#
# usage: run-seccomp-tests MAYFLY GUESTDIR MAYFLY_SELFTEST
#   MAYFLY_SELFTEST  mayfly built with the test-only hook: MAYFLY_SECCOMP_SELFTEST=ROLE
#                    makes the thread of that role make one forbidden call (syslog)
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cat kill cut id readlink sort
[ $# -eq 3 ] || usage "run-seccomp-tests MAYFLY GUESTDIR MAYFLY_SELFTEST"
mayfly=$1
guestdir=$2
selftest=$3
case_timeout=${E2E_CASE_TIMEOUT:-120}

need_mayfly
[ -x "$selftest" ] || bail "$selftest is missing or not executable"
need_guest "$guestdir" vmlinux initramfs.cpio.gz rootfs.ext4
need_kvm e2e-suite
export MAYFLY_GUEST_DIR="$guestdir"

tap_workdir seccomp-tests
export MAYFLY_CACHE="$work/cache"
bg=""
tap_cleanup() {
	if [ -n "$bg" ]; then kill -KILL "$bg" 2>/dev/null; fi
}

# A failed point: the last lines of the last run's stderr.
tap_diag() {
	tap_tail 8 "# stderr: " "$work/err"
}


# comm PID: a process's (or task's) name.
comm() {
	cat "/proc/$1/comm" 2>/dev/null
}

# vm_pids PID: the process that runs the VM started as PID: PID itself, or,
# jailed (as root, the default), the VM process its jail supervisor forked.
# The supervisor stays outside, waits and forwards signals, and reads nothing
# from the guest (docs/security.md); it is held to one thread. So is the
# approver's spawner (--approve), its other child, which runs the approver
# with the caller's privileges and reads only the calls the VMM asks about.
vm_pids() {
	kids=""
	for k in $(children_of "$1"); do
		[ "$(comm "$k")" = mayfly-approve ] || kids="$kids $k"
	done
	if [ -z "$kids" ]; then
		echo "$1"
		return
	fi
	sup=$1
	set -- /proc/"$sup"/task/*
	[ $# -eq 1 ] || fail "the jail supervisor $sup has $# threads, want 1"
	echo "$kids"
}

# seccomp_of PID WANT: every task of the VM process started as PID (vm_pids)
# shows "Seccomp: WANT"; $tasks counts them.
seccomp_of() {
	tasks=0
	for p in $(vm_pids "$1"); do
		for st in /proc/"$p"/task/*/status; do
			[ -r "$st" ] || continue
			tasks=$((tasks + 1))
			got=$(sed -n 's/^Seccomp:[[:space:]]*//p' "$st")
			[ "$got" = "$2" ] || fail "task $(dirname "$st" | sed 's|.*/||') ($(sed -n 's/^Name:[[:space:]]*//p' "$st")) has Seccomp: $got, want $2"
		done
	done
	[ "$tasks" -gt 0 ] || fail "no tasks of pid $1"
}

# names_of PID: the thread names of the VM process started as PID, sorted, on one line.
names_of() {
	for p in $(vm_pids "$1"); do
		cat /proc/"$p"/task/*/comm 2>/dev/null
	done | sort | tr '\n' ' '
}

# has_roles PID ROLE...: a thread named mayfly-ROLE for each ROLE.
has_roles() {
	p=$1
	shift
	names=" $(names_of "$p")"
	for r in "$@"; do
		case $names in
		*" mayfly-$r "*) ;;
		*) fail "no thread named mayfly-$r: $names" ;;
		esac
	done
}

# wait_roles PID ROLE...: up to 60 s until the VM process has those threads.
wait_roles() {
	i=0
	while [ $i -lt 300 ]; do
		why_before=$why
		has_roles "$@"
		[ "$why" = "$why_before" ] && return 0
		why=$why_before
		[ -n "${names# }" ] && seen=$names
		kill -0 "$1" 2>/dev/null || break
		sleep 0.2
		i=$((i + 1))
	done
	has_roles "$@"
	[ -z "$why" ] || why="$why (last seen:${seen:-})"
}

# boot_vsock SOCK ARGS...: a VM in the background with its agent on SOCK; waits
# until the agent answers. $bg is its pid.
boot_vsock() {
	sock=$1
	shift
	timeout -k 5 "$case_timeout" "$mayfly" boot --rootfs "$guestdir/rootfs.ext4" --cpus 2 \
		--vsock "$sock" "$@" </dev/null >"$work/bootout" 2>"$work/err" &
	bg=$!
	i=0
	while [ $i -lt 90 ]; do
		if [ -S "$sock" ] && timeout 30 "$mayfly" exec --vsock "$sock" -- true \
			</dev/null >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
		i=$((i + 1))
	done
	fail "the agent of a boot --vsock VM never answered"
	return 1
}
stop_bg() {
	kill -TERM "$bg" 2>/dev/null
	wait "$bg"
	rc=$?
	bg=""
}

# ---- a running VM: every thread confined ----

if boot_vsock "$work/vm.sock"; then
	seccomp_of "$bg" 2
	# main, log writer, console, I/O, 2 vCPUs
	[ "$tasks" -ge 6 ] || fail "only $tasks threads, want at least 6"
	echo "# boot --vsock: $tasks threads, all Seccomp: 2"
	timeout 30 "$mayfly" exec --vsock "$work/vm.sock" -- echo exec-ok </dev/null >"$work/out" 2>&1
	grep -qxF exec-ok "$work/out" || fail "exec under seccomp: $(head -c 200 "$work/out")"
	stop_bg
	want_rc 143
	[ -e "$work/vm.sock" ] && fail "the socket was left behind"
fi
tap "boot --vsock: every thread shows Seccomp: 2, exec works, SIGTERM ends it (143), socket removed"

# The first run makes the default snapshot (its own threads, the snapshot role).
mf run -- sh -c 'echo first-ok; exit 3'
want_rc 3
grep -qxF first-ok "$work/out" || fail "stdout: $(head -c 200 "$work/out")"
tap "mayfly run under seccomp: the default snapshot made, then restored; output and exit code through"

# A background job truncates its files only once it runs: empty them first,
# or the wait below may read the last point's output.
: >"$work/out"
: >"$work/err"
# The command runs until the checks are done and SIGTERM (passed on to it)
# ends it: they take what they take on a loaded machine, never a race with
# a sleep.
timeout -k 5 "$case_timeout" "$mayfly" run --cpus 1 -- sh -c 'echo started; exec sleep 600' \
	</dev/null >"$work/out" 2>"$work/err" &
bg=$!
# Looked at once the command runs: every thread of the VM is started by then.
i=0
while [ $i -lt 300 ] && ! grep -qxF started "$work/out"; do
	sleep 0.1
	i=$((i + 1))
done
seccomp_of "$bg" 2
echo "# run: $tasks threads, all Seccomp: 2: $(names_of "$bg")"
[ "$tasks" -ge 6 ] || fail "only $tasks threads, want at least 6 (main, agent, log, console, io, vcpu)"
has_roles "$bg" agent log console io vcpu0
kill -TERM "$bg"
wait "$bg"
rc=$?
bg=""
want_rc 143
grep -q 'not applied\|unfiltered\|without its' "$work/err" && fail "a warning: $(head -n 2 "$work/err")"
tap "mayfly run: every thread (the agent client's too) shows Seccomp: 2 while the command runs, each named for its role; SIGTERM ends it (143)"

# --approve: the approver runs in the spawner, outside the jail with our
# privileges; the VM, its agent thread included, is jailed and filtered.
rm -f "$work/approver.uid"
: >"$work/out"
: >"$work/err"
timeout -k 5 "$case_timeout" "$mayfly" run --cpus 1 \
	--approve "id -u >'$work/approver.uid'; readlink /proc/self/ns/mnt >'$work/approver.ns'" \
	-- sh -c 'echo started; exec sleep 600' </dev/null >"$work/out" 2>"$work/err" &
bg=$!
i=0
while [ $i -lt 300 ] && ! grep -qxF started "$work/out"; do
	sleep 0.1
	i=$((i + 1))
done
seccomp_of "$bg" 2
has_roles "$bg" agent io vcpu0
for p in $(vm_pids "$bg"); do
	[ "$(sed -n 's/^Uid:[[:space:]]*//p' "/proc/$p/status" | cut -f1)" != 0 ] ||
		[ "$(id -u)" != 0 ] || fail "the VM process runs as root: not jailed"
done
spawner=""
for k in $(children_of "$bg"); do
	[ "$(comm "$k")" = mayfly-approve ] && spawner=$k
done
[ -n "$spawner" ] || [ "$(id -u)" != 0 ] || fail "no approver spawner beside the jailed VM"
echo "# run --approve: $tasks threads, all Seccomp: 2: $(names_of "$bg")"
kill -TERM "$bg"
wait "$bg"
rc=$?
bg=""
want_rc 143
[ "$(cat "$work/approver.uid" 2>/dev/null)" = "$(id -u)" ] ||
	fail "the approver ran as uid '$(cat "$work/approver.uid" 2>/dev/null)', want ours"
[ "$(cat "$work/approver.ns" 2>/dev/null)" = "$(readlink /proc/self/ns/mnt)" ] ||
	fail "the approver did not run in our mount namespace"
[ -n "$spawner" ] && kill -0 "$spawner" 2>/dev/null && fail "the spawner $spawner outlived mayfly"
grep -q 'not applied\|unfiltered\|without its' "$work/err" && fail "a warning: $(head -n 2 "$work/err")"
tap "run --approve: jailed, every thread Seccomp: 2; the approver runs as the caller, outside; the spawner ends with mayfly"

# mayfly mcp: its session's threads (reader, watcher) and agent thread filtered too.
cat >"$work/mcp.in" <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"seccomp","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 6; echo mcp-ok"}}}
JSON
# Its input stays open while the call runs: the reader thread ends at its end.
: >"$work/out"
: >"$work/err"
(cat "$work/mcp.in"; sleep 9) |
	timeout -k 5 "$case_timeout" "$mayfly" mcp --cpus 1 --approve 'true' >"$work/out" 2>"$work/err" &
bg=$!
wait_roles "$bg" agent mcp-in mcp-stop io vcpu0
sleep 1
seccomp_of "$bg" 2
for p in $(vm_pids "$bg"); do
	[ "$(sed -n 's/^Uid:[[:space:]]*//p' "/proc/$p/status" | cut -f1)" != 0 ] ||
		[ "$(id -u)" != 0 ] || fail "mcp's VM process runs as root: not jailed"
	[ "$(readlink "/proc/$p/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
		[ "$(id -u)" != 0 ] || fail "mcp's VM process shares our mount namespace"
done
echo "# mcp: $tasks threads, all Seccomp: 2: $(names_of "$bg")"
wait "$bg"
rc=$?
bg=""
[ -z "$why" ] || why="$why (mcp exited $rc; its answer to the call: $(sed -n 2p "$work/out" | head -c 600))"
want_rc 0
grep -q 'mcp-ok' "$work/out" || fail "stdout: $(head -c 300 "$work/out")"
tap "mcp --approve: jailed; every thread (agent, session reader and watcher) shows Seccomp: 2, each named"

echo data >"$work/in.txt"
mf snapshot create --setup 'echo setup-ok >/root/s.txt' --out "$work/snap"
want_rc 0
tap "snapshot create under seccomp (the snapshot role saves the VM)"
mf run --snapshot "$work/snap" --put "$work/in.txt:/root/in.txt" --get "/root/s.txt:$work/got.txt" \
	-- cat /root/in.txt
want_rc 0
grep -qxF data "$work/out" || fail "--put: stdout $(head -c 200 "$work/out")"
[ "$(cat "$work/got.txt" 2>/dev/null)" = setup-ok ] || fail "--get brought back '$(cat "$work/got.txt" 2>/dev/null)'"
tap "run --snapshot restores it under seccomp, with --put and --get"

# ---- --no-seccomp ----

if boot_vsock "$work/vm2.sock" --no-seccomp; then
	seccomp_of "$bg" 0
	grep -q -- '--no-seccomp' "$work/err" || fail "no warning on stderr"
	stop_bg
fi
tap "--no-seccomp: every thread shows Seccomp: 0, with a warning"

# ---- each role's filter really kills: the test-only hook breaks it ----

# killed ROLE ARGS...: mayfly-selftest ARGS with ROLE's thread breaking its filter.
killed() {
	role=$1
	shift
	MAYFLY_SECCOMP_SELFTEST=$role timeout -k 5 "$case_timeout" "$selftest" "$@" \
		</dev/null >"$work/out" 2>"$work/err"
	rc=$?
	want_rc 159
	line="mayfly: seccomp: the $role thread made a forbidden system call 103 (syslog); ending the process (exit 159)"
	grep -qxF "$line" "$work/err" || fail "stderr lacks '$line'"
	[ "$(grep -c 'forbidden system call' "$work/err")" -eq 1 ] || fail "not exactly one line"
	tap "the $role thread breaking its filter: exit 159 and one line naming it"
}
killed main boot --init-cmd true
killed vcpu boot --init-cmd true
killed console boot --init-cmd true
killed log boot --init-cmd true
killed io run --cold -- true
killed agent run --cold -- true
killed supervisor run --cold -- true
killed snapshot snapshot create --out "$work/snap2"

tap_end
