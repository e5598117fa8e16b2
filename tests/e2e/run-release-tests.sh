#!/bin/sh
# shellcheck disable=SC2016 # JSON bodies and guest commands are single-quoted on purpose
# run-release-tests.sh - a short tour of every seccomp role and every kind of mayfly
# thread and process, run with the release binary (build-release: -O3, static,
# glibc's malloc, no sanitizer group in its filters), which the other suites
# never run: run (the default snapshot made in a child, then restored; --json,
# --stdin, --tty, --timeout), run with --allow-net (the broker and its
# workers), --audit (the audit writer), --approve (the spawner), --put/--get,
# a cold boot with 4 vCPUs, snapshot create (jailed and --no-jail) and a
# restore, boot --vsock with exec, cp, mayfly pause and fork (the control
# thread), mcp (its session threads) and serve (its supervisor and the VMs it
# spawns). Every VM thread and broker process shows Seccomp: 2, and no process
# ends with a seccomp line. Prints TAP.
#
# usage: run-release-tests MAYFLY GUESTDIR TOOLS
#   TOOLS  a directory with serve-client (the HTTP client) and jsoncheck
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cat kill cut id sort httpd dd
[ $# -eq 3 ] || usage "run-release-tests MAYFLY GUESTDIR TOOLS"
mayfly=$1
guestdir=$2
tools=$3
case_timeout=${E2E_CASE_TIMEOUT:-120}

need_mayfly
[ -x "$tools/serve-client" ] && [ -x "$tools/jsoncheck" ] || bail "$tools lacks serve-client or jsoncheck"
need_guest "$guestdir" vmlinux initramfs.cpio.gz rootfs.ext4
need_kvm e2e-suite
[ "$(id -u)" = 0 ] || bail "the release tour runs as root (jailed VMs, the default)"
export MAYFLY_GUEST_DIR="$guestdir"

tap_workdir release-tests
export MAYFLY_CACHE="$work/cache"
client=$tools/serve-client
pids=""
made_hosts=""
tap_cleanup() {
	for p in $pids; do
		kill -KILL "$p" 2>/dev/null
	done
	[ -n "$made_hosts" ] && rm -f /etc/hosts
}

# A failed point shows the last lines of every stderr since the last point;
# each point starts with none.
tap_diag() {
	tap_tail -n 6 "# " "$work"/*.err
}
tap_after() {
	rm -f "$work"/*.err
}
# A release filter that lacks a call glibc makes ends the process with
# this line (exit 159): the failure this suite exists to catch.
no_sigsys() {
	for f in "$work"/*.err; do
		[ -f "$f" ] || continue
		l=$(grep -m1 'seccomp: the .* forbidden system call' "$f") && fail "$(basename "$f"): $l"
	done
}
# mf NAME ARGS...: mayfly ARGS, stdout in $work/NAME.out, stderr in $work/NAME.err, $rc.
mf() {
	name=$1
	shift
	timeout -k 5 "$case_timeout" "$mayfly" "$@" </dev/null >"$work/$name.out" 2>"$work/$name.err"
	rc=$?
}
# vm_pids PID: the jailed VM process of the mayfly started as PID (the jail
# supervisor's child that is neither the approver's spawner nor the broker).
vm_pids() {
	for k in $(children_of "$1"); do
		case $(cat "/proc/$k/comm" 2>/dev/null) in
		mayfly-approve | mayfly-broker) ;;
		*) echo "$k" ;;
		esac
	done
}
# confined PID ROLE...: the VM of PID has a thread mayfly-ROLE for each ROLE,
# and every thread of it shows Seccomp: 2.
confined() {
	p=$1
	shift
	vp=$(vm_pids "$p")
	[ -n "$vp" ] || { fail "no jailed VM process under $p"; return; }
	names=" $(for v in $vp; do cat /proc/"$v"/task/*/comm; done 2>/dev/null | sort | tr '\n' ' ')"
	for r in "$@"; do
		case $names in
		*" mayfly-$r "*) ;;
		*) fail "no thread mayfly-$r:$names" ;;
		esac
	done
	for v in $vp; do
		for st in /proc/"$v"/task/*/status; do
			got=$(sed -n 's/^Seccomp:[[:space:]]*//p' "$st" 2>/dev/null)
			[ -z "$got" ] || [ "$got" = 2 ] ||
				fail "$(sed -n 's/^Name:[[:space:]]*//p' "$st") has Seccomp: $got"
		done
	done
	echo "# threads:$names"
}
# wait_line FILE LINE: up to 60 s until FILE has LINE.
wait_line() {
	i=0
	while [ $i -lt 600 ] && ! grep -qxF "$2" "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
}

# The broker resolves names with the host's resolver: /etc/hosts first. The
# harness's L1 has none; one for this run only (a real host keeps its own).
# L1 also leaves lo down (a connect to 127.0.0.1 is ENETUNREACH there).
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null || bail "cannot bring lo up here"
if [ ! -e /etc/hosts ]; then
	echo '127.0.0.1 localhost' >/etc/hosts && made_hosts=1
fi
mkdir "$work/www"
echo served-by-l1 >"$work/www/hello.txt"
dd if=/dev/zero of="$work/www/big" bs=1024 count=2048 2>/dev/null
httpd -f -p 127.0.0.1:8080 -h "$work/www" &
pids="$pids $!"

# ---- run: the default snapshot (made in a child: snapshot role), restored ----

mf first run -- sh -c 'echo first-ok; exit 3'
want_rc 3
has "$work/first.out" first-ok
no_sigsys
tap "run: the default snapshot made, then restored; output and exit code 3 through"

# ---- run with every option that starts a thread or a process ----

echo put-data >"$work/in.txt"
net="--allow-net localhost:8080 --allow-net nowhere.test:8080 --allow-net 127.0.0.1"
# shellcheck disable=SC2086 # $net is words
timeout -k 5 "$case_timeout" "$mayfly" run $net --audit "$work/audit.jsonl" --approve true \
	--put "$work/in.txt:/root/in.txt" --get "/root/out.txt:$work/got.txt" -- sh -c \
	'echo started; wget -q -O - http://localhost:8080/hello.txt; wget -q -O - http://nowhere.test:8080/ 2>&1 || echo refused
	 for i in 1 2 3 4 5 6; do wget -q -O /tmp/big$i http://localhost:8080/big & done; wait
	 cat /tmp/big* | wc -c; sleep 2; cat /root/in.txt >/root/out.txt; echo late-ok' \
	</dev/null >"$work/net.out" 2>"$work/net.err" &
bg=$!
pids="$pids $bg"
wait_line "$work/net.out" started
confined "$bg" agent log console io vcpu0
brokers=$(named mayfly-broker)
nb=0
for b in $brokers; do
	nb=$((nb + 1))
	[ "$(sed -n 's/^Seccomp:[[:space:]]*//p' "/proc/$b/status" 2>/dev/null)" = 2 ] ||
		fail "broker $b is not filtered"
done
[ "$nb" = 8 ] || fail "$nb broker processes, want 8"
wait "$bg"
rc=$?
want_rc 0
has "$work/net.out" served-by-l1
has "$work/net.out" refused
has "$work/net.out" late-ok
grep -qx '[[:space:]]*12582912' "$work/net.out" || fail "6 downloads of 2 MiB at once: $(head -c 300 "$work/net.out")"
[ "$(cat "$work/got.txt" 2>/dev/null)" = put-data ] || fail "--get brought back '$(cat "$work/got.txt" 2>/dev/null)'"
has "$work/audit.jsonl" '"host":"localhost"'
mf verify audit verify "$work/audit.jsonl"
want_rc 0
for b in $brokers; do
	kill -0 "$b" 2>/dev/null && fail "broker $b outlived mayfly"
done
no_sigsys
tap "run --allow-net --audit --approve --put --get: every VM thread and the 8 broker processes filtered; a fetch through the broker (/etc/hosts), 6 downloads at once, a refused name (DNS); the audit chain verifies"

mf cold run --cold --cpus 4 -- sh -c 'grep -c ^processor /proc/cpuinfo'
want_rc 0
has "$work/cold.out" 4
no_sigsys
tap "run --cold --cpus 4: a cold boot with four vCPU threads"

# ---- run's other paths: --json, --stdin, --env, --cwd, --tty, --timeout ----

printf 'in-one\nin-two\n' >"$work/stdin.txt"
timeout -k 5 "$case_timeout" "$mayfly" run --json --stdin - --env K=v --cwd /tmp -- \
	sh -c 'cat; echo "$K in $(pwd)"; echo err-line >&2; exit 5' \
	<"$work/stdin.txt" >"$work/json.out" 2>"$work/json.err"
rc=$?
want_rc 5
has "$work/json.out" in-two
has "$work/json.out" 'v in /tmp'
has "$work/json.out" '{"event":"stderr","data":"err-line\n"}'
has "$work/json.out" '"event":"exit"'
"$tools/jsoncheck" <"$work/json.out" >/dev/null || fail "a --json line is not strict JSON"
mf tty run --tty -- sh -c 'if [ -t 0 ] && [ -t 1 ]; then echo on-a-tty; fi; stty size'
want_rc 0
has "$work/tty.out" on-a-tty
has "$work/tty.out" '24 80'
mf tmo run --timeout 2 -- sleep 60
want_rc 124
no_sigsys
tap "run --json --stdin --env --cwd, run --tty, run --timeout: events as strict JSON, stdin read to its end, a terminal in the guest, the command killed at its timeout (124)"

# ---- snapshot create (the snapshot role saves) and a restore ----

mf snap snapshot create --setup 'echo setup-ok >/root/s.txt' --out "$work/snap"
want_rc 0
mf restore run --snapshot "$work/snap" --get "/root/s.txt:$work/s.txt" -- cat /root/s.txt
want_rc 0
has "$work/restore.out" setup-ok
has "$work/s.txt" setup-ok
no_sigsys
tap "snapshot create, then run --snapshot with --get"

# Unjailed, the snapshot thread itself (filtered) installs the snapshot.
mf nojail snapshot create --no-jail --setup 'echo nojail-ok >/root/n.txt' --out "$work/snap-nojail"
want_rc 0
mf nojail-run run --no-jail --snapshot "$work/snap-nojail" -- cat /root/n.txt
want_rc 0
has "$work/nojail-run.out" nojail-ok
no_sigsys
tap "snapshot create --no-jail (its snapshot thread installs the snapshot), then a restore"

# ---- boot --vsock: exec, pause, resume, fork (the control socket's thread) ----

# boot NAME ARGS...: a VM in the background on $work/NAME.sock, ready once
# its agent answers; its pid in $vm.
boot() {
	name=$1
	shift
	"$mayfly" boot --vsock "$work/$name.sock" "$@" </dev/null >"$work/$name.out" 2>"$work/$name.err" &
	vm=$!
	pids="$pids $vm"
	i=0
	while [ $i -lt 90 ]; do
		x "$name" true && return 0
		kill -0 "$vm" 2>/dev/null || break
		sleep 1
		i=$((i + 1))
	done
	fail "VM $name never answered"
	return 1
}
# x NAME CMD: CMD (sh -c) in VM NAME; stdout in $work/x.out, $rc.
x() {
	timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$work/$1.sock" -- sh -c "$2" \
		</dev/null >"$work/x.out" 2>"$work/x.err"
	rc=$?
}
stop() {   # stop PID: SIGTERM, its status in $rc
	kill -TERM "$1" 2>/dev/null
	wait "$1"
	rc=$?
}

# shellcheck disable=SC2086 # $net is words
if boot a --rootfs "$guestdir/rootfs.ext4" --cpus 2 $net --audit "$work/boot-audit.jsonl"; then
	a=$vm
	x a 'echo kept >/root/keep; wget -q -O - http://localhost:8080/hello.txt'
	has "$work/x.out" served-by-l1
	# mayfly cp both ways: a client of its own, like exec.
	head -c 300000 /dev/urandom >"$work/cp-in.bin"
	mf cp-in cp --vsock "$work/a.sock" "$work/cp-in.bin" :/root/cp.bin
	want_rc 0
	mf cp-out cp --vsock "$work/a.sock" :/root/cp.bin "$work/cp-out.bin"
	want_rc 0
	cmp -s "$work/cp-in.bin" "$work/cp-out.bin" || fail "mayfly cp's round trip changed the file"
	mf pause pause --vsock "$work/a.sock" --out "$work/p"
	want_rc 0
	wait "$a"
	rc=$?
	want_rc 0
	if boot b --snapshot "$work/p"; then
		b=$vm
		x b 'cat /root/keep'
		has "$work/x.out" kept
		mf fork fork --vsock "$work/b.sock" --out "$work/f"
		want_rc 0
		if boot c --snapshot "$work/f"; then
			x c 'cat /root/keep; echo child >/root/keep'
			has "$work/x.out" kept
			x b 'cat /root/keep'
			has "$work/x.out" kept
			stop "$vm"
			want_rc 143
		fi
		stop "$b"
		want_rc 143
	fi
	mf verify audit verify "$work/boot-audit.jsonl"
	want_rc 0
fi
no_sigsys
tap "boot --vsock --allow-net --audit: exec, mayfly cp in and out, mayfly pause, resume, mayfly fork, the child and the parent answer; SIGTERM ends each (143)"

# ---- mcp: its session's threads ----

cat >"$work/mcp.in" <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"release","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 4; echo mcp-ok"}}}
JSON
(cat "$work/mcp.in"; sleep 8) |
	timeout -k 5 "$case_timeout" "$mayfly" mcp --approve true --audit "$work/mcp-audit.jsonl" \
		>"$work/mcp.out" 2>"$work/mcp.err" &
bg=$!
pids="$pids $bg"
i=0
while [ $i -lt 600 ] && ! grep -q '"id":1' "$work/mcp.out" 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
sleep 1
confined "$bg" agent mcp-in mcp-stop io vcpu0
wait "$bg"
rc=$?
want_rc 0
has "$work/mcp.out" mcp-ok
mf verify audit verify "$work/mcp-audit.jsonl"
want_rc 0
no_sigsys
tap "mcp --approve --audit: a call runs; every thread (agent, session reader and watcher) filtered"

# ---- serve: the service and the VMs it spawns ----

token=release-token-0123456789abcdef
printf 'alice %s\n' "$token" >"$work/tokens"
chmod 600 "$work/tokens"
req() {   # req WANT METHOD URL [serve-client options...]: $st, the body in $work/body
	want=$1
	m=$2
	u=$3
	shift 3
	st=$("$client" -t "$token" -o "$work/body" "$@" "$work/api.sock" "$m" "$u") || st=none
	[ "$st" = "$want" ] || fail "$m $u: status $st, want $want: $(head -c 300 "$work/body")"
}
"$mayfly" serve --state "$work/state" --socket "$work/api.sock" --tokens "$work/tokens" --pool 1 \
	--audit "$work/serve-audit.jsonl" --approve true >"$work/serve.err" 2>&1 &
spid=$!
pids="$pids $spid"
i=0
while [ $i -lt 600 ]; do
	st=$("$client" -o /dev/null "$work/api.sock" GET /health 2>/dev/null) && [ "$st" = 200 ] && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.5
	i=$((i + 1))
done
req 201 POST /sandboxes -d '{}'
sb=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$work/body")
[ -n "$sb" ] || fail "no sandbox id: $(head -c 300 "$work/body")"
req 200 POST "/sandboxes/$sb/exec" -d '{"argv":["sh","-c","echo serve-ok >/root/f; cat /root/f"]}'
has "$work/body" '{"event":"stdout","data":"serve-ok\n"}'
"$tools/jsoncheck" <"$work/body" >/dev/null || fail "not JSON event lines: $(head -c 300 "$work/body")"
# A fork goes through the sandbox VM's control socket (its snapshot thread).
req 201 POST "/sandboxes/$sb/fork" -d '{"count":1}'
kid=$(sed 's/"parent"[^,]*,//' "$work/body" | tr '{' '\n' | sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' | head -n 1)
[ -n "$kid" ] || fail "no child in $(head -c 300 "$work/body")"
req 200 POST "/sandboxes/$kid/exec" -d '{"argv":["cat","/root/f"]}'
has "$work/body" '{"event":"stdout","data":"serve-ok\n"}'
req 204 DELETE "/sandboxes/$sb"
req 204 DELETE "/sandboxes/$kid"   # sandboxes outlive a drain: none is left
kill -TERM "$spid"
wait "$spid"
rc=$?
want_rc 0
no_sigsys
tap "serve --pool 1 --audit --approve: a sandbox created, an exec, a fork whose child answers, a delete; SIGTERM drains (exit 0)"

tap_end
