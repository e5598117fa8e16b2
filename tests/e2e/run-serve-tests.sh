#!/bin/sh
# shellcheck disable=SC2016 # JSON bodies are single-quoted on purpose
# run-serve-tests.sh - mayfly serve end to end in the default Linux guest: every
# route's happy path, the bad requests, the approver's refusal, a delete racing
# an exec, concurrent clients, sandboxes that outlive a drain (SIGTERM) or a
# kill -9 of the service and are taken over by the next one, and with
# --ephemeral nothing left behind. Prints TAP.
#
# usage: run-serve-tests MAYFLY GUESTDIR TOOLS
#   TOOLS  a directory with serve-client (the HTTP client) and jsoncheck
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Environment: E2E_SERVE_CYCLES create -> exec -> delete cycles per client of the
# load case (8 clients; default 8, 64 cycles in all: about 2 min nested; the long
# mode in docs/reliability.md runs more).
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cp cat date cmp ls sort stat mount umount dd df od
[ $# -eq 3 ] || usage "run-serve-tests MAYFLY GUESTDIR TOOLS"
mayfly=$1
guestdir=$2
tools=$3
cycles=${E2E_SERVE_CYCLES:-8}

need_mayfly
need_guest "$guestdir" vmlinux rootfs.ext4
[ -x "$tools/serve-client" ] && [ -x "$tools/jsoncheck" ] || bail "$tools lacks serve-client or jsoncheck"
need_kvm e2e-suite
export MAYFLY_GUEST_DIR="$guestdir"
case $mayfly in /*) ;; *) mayfly=$(pwd)/$mayfly ;; esac
case $tools in /*) ;; *) tools=$(pwd)/$tools ;; esac
client=$tools/serve-client

tap_workdir serve-tests
export MAYFLY_CACHE="$work/cache"
state=$work/state
sock=$work/api.sock
token=e2e-token-0123456789abcdef
printf '# the test client\nalice %s\n' "$token" >"$work/tokens"
chmod 600 "$work/tokens"
spid=""
tap_cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
}

# Each point starts with a line of its time (the runner's budget is tight); a
# failed point shows the service's last lines.
t_last=$(date +%s)
tap_before() {
	t_now=$(date +%s)
	echo "# $((t_now - t_last)) s"
	t_last=$t_now
}
tap_diag() {
	tap_tail 5 "# service: " "$work/serve.err"
}

# req METHOD URL [serve-client options...]: the status in $st, the body in $work/body.
req() {
	m=$1
	u=$2
	shift 2
	st=$("$client" -t "$token" -o "$work/body" "$@" "$sock" "$m" "$u") || st=none
}
want() {
	[ "$st" = "$1" ] || fail "$m $u: status $st, want $1: $(head -c 300 "$work/body")"
}
# The id of the sandbox in $work/body.
id_of() {
	sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$work/body"
}
# VMs of ours: the sandboxes whose mayfly boot (the jail's supervisor, or the
# VM process it forked) still runs, counted by their socket under $state.
vms() {
	for f in /proc/[0-9]*/cmdline; do
		# A line each (a command line has no newline of its own).
		{ tr '\0' ' ' <"$f" && echo; } 2>/dev/null | sed -n "s|.*boot --snapshot .* --vsock \($state/sb/[0-9a-f]*\)/vm/vsock.*|\1|p"
	done | sort -u | wc -l | tr -d ' '
}
# Every mayfly process's command line, for a failure's message.
mayfly_procs() {
	for f in /proc/[0-9]*/cmdline; do
		{ tr '\0' ' ' <"$f"; } 2>/dev/null | grep "mayfly" | sed "s|^|[${f#/proc/}] |"
	done | tr '\n' ';'
}
sandboxes_on_disk() {
	ls "$state/sb" 2>/dev/null | wc -l | tr -d ' '
}
# start_service ARGS...: in the background, ready once its socket answers.
start_service() {
	"$mayfly" serve --state "$state" --socket "$sock" --tokens "$work/tokens" "$@" \
		>>"$work/serve.err" 2>&1 &
	spid=$!
	i=0
	while [ $i -lt 600 ]; do
		st=$("$client" -o /dev/null "$sock" GET /health 2>/dev/null) && [ "$st" = 200 ] && return 0
		kill -0 "$spid" 2>/dev/null || return 1
		sleep 0.5
		i=$((i + 1))
	done
	return 1
}
# drain_empty WHAT: SIGTERM the service; no VM process, VM cgroup or
# sandbox directory may be left after WHAT.
drain_empty() {
	kill -TERM "$spid"
	wait "$spid"
	spid=""
	[ "$(vms)" -eq 0 ] || fail "$(vms) VM processes left after $1"
	[ "$(sandboxes_on_disk)" -eq 0 ] || fail "sandbox directories left after $1: $(ls "$state/sb")"
	! ls -d /sys/fs/cgroup/mayfly/vm-* >/dev/null 2>&1 ||
		fail "cgroups left after $1: $(ls -d /sys/fs/cgroup/mayfly/vm-*)"
}
# wait_gone PID SECONDS
wait_gone() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt $(($2 * 10)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	! kill -0 "$1" 2>/dev/null
}

# ---- start: the default snapshot is made on the first start (a cold boot) ----

echo "# starting mayfly serve (makes the default snapshot once: a minute nested)"
approver='! grep -q forbidden'
start_service --pool 2 --audit "$work/audit.log" --approve "$approver" ||
	bail "mayfly serve did not start: $(tail -n 5 "$work/serve.err")"
req GET /health
want 200
has "$work/body" '"status":"ok"'
[ "$(stat -c %a "$sock")" = 600 ] || fail "the socket is mode $(stat -c %a "$sock"), want 600"
tap "serve starts, /health answers, its socket is mode 0600"

st=$("$client" -o "$work/body" "$sock" GET /sandboxes)
[ "$st" = 401 ] || fail "no token: status $st, want 401"
has "$work/body" '"code":"unauthorized"'
st=$("$client" -t wrong-token-0123456789 -o "$work/body" "$sock" GET /sandboxes)
[ "$st" = 401 ] || fail "a wrong token: status $st, want 401"
tap "a missing or wrong token is 401"

# ---- one sandbox, every route ----

req POST /sandboxes -d '{"env":{"GREETING":"hello"},"ttl":600}'
want 201
sb=$(id_of)
[ -n "$sb" ] || fail "no id in $(cat "$work/body")"
has "$work/body" '"state":"running"'
tap "POST /sandboxes creates a sandbox (201, its id)"

req GET "/sandboxes/$sb"
want 200
has "$work/body" "\"id\":\"$sb\""
req GET /sandboxes
want 200
has "$work/body" "\"id\":\"$sb\""
tap "GET /sandboxes/ID and GET /sandboxes show it"

req POST "/sandboxes/$sb/exec" -d '{"argv":["sh","-c","echo $GREETING $X; echo err >&2; exit 3"],"env":{"X":"world"}}'
want 200
"$tools/jsoncheck" <"$work/body" >/dev/null || fail "not JSON event lines: $(head -c 300 "$work/body")"
has "$work/body" '{"event":"stdout","data":"hello world\n"}'
has "$work/body" '{"event":"stderr","data":"err\n"}'
has "$work/body" '"event":"exit"'
has "$work/body" '"code":3'
tap "exec streams the events of run --json (sandbox and call environment, exit code)"

req POST "/sandboxes/$sb/exec" -d '{"argv":["cat"],"stdin":"from the body\n"}'
want 200
has "$work/body" '{"event":"stdout","data":"from the body\n"}'
req POST "/sandboxes/$sb/exec" -d '{"argv":["sleep","30"],"timeout":1}'
want 200
has "$work/body" '"timed_out":true'
tap "exec takes stdin from the body and honours its timeout"

"$client" -t "$token" -o "$work/long" -D "$work/long.h" "$sock" POST "/sandboxes/$sb/exec" \
	-d '{"argv":["sleep","60"]}' >"$work/long.st" &
cpid=$!
eid=""
i=0
while [ -z "$eid" ] && [ $i -lt 100 ]; do
	sleep 0.2
	eid=$(sed -n 's/^X-Mayfly-Exec-Id: \([0-9]*\).*/\1/p' "$work/long.h" 2>/dev/null | tr -d '\r')
	i=$((i + 1))
done
[ -n "$eid" ] || fail "no X-Mayfly-Exec-Id header"
# A delete racing the exec: refused while it runs.
req DELETE "/sandboxes/$sb"
want 409
has "$work/body" '"code":"conflict"'
req POST "/sandboxes/$sb/exec/$eid/signal" -d '{"signal":"KILL"}'
want 202
wait_gone "$cpid" 30 || fail "the exec did not end after SIGKILL"
has "$work/long" '"signal":9'
req POST "/sandboxes/$sb/exec/$eid/signal" -d '{"signal":"KILL"}'
want 404
tap "a delete racing an exec is 409; POST .../exec/ID/signal kills it; the exec's id then is 404"

printf 'line one\nline two\n' >"$work/up"
req PUT "/sandboxes/$sb/files?path=/root/up.txt&mode=600" -f "$work/up" -c application/octet-stream
want 204
req GET "/sandboxes/$sb/files?path=/root/up.txt"
want 200
cmp -s "$work/body" "$work/up" || fail "GET returned other bytes: $(head -c 100 "$work/body")"
req GET "/sandboxes/$sb/files/stat?path=/root/up.txt"
want 200
has "$work/body" '"size":18'
has "$work/body" '"mode":384'
req POST "/sandboxes/$sb/files/mkdir" -d '{"path":"/root/a/b","parents":true}'
want 201
req GET "/sandboxes/$sb/files/list?path=/root"
want 200
has "$work/body" '{"name":"up.txt","type":"file","mode":384,"size":18}'
has "$work/body" '"name":"a","type":"dir"'
req DELETE "/sandboxes/$sb/files?path=/root/a&recursive=true"
want 204
req DELETE "/sandboxes/$sb/files?path=/root/up.txt"
want 204
req GET "/sandboxes/$sb/files?path=/root/up.txt"
want 404
tap "files: put, get, stat, mkdir, list, remove; a missing file is 404"

# A file larger than the service would ever hold: 64 MiB streamed in and
# back out, while the service's peak RSS (reset first) grows by far less.
head -c $((64 << 20)) /dev/urandom >"$work/large"
hwm() {
	sed -n 's/^VmHWM:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$spid/status"
}
echo 5 >"/proc/$spid/clear_refs" || fail "cannot reset the service's peak RSS"
h0=$(hwm)
req PUT "/sandboxes/$sb/files?path=/root/large" -f "$work/large" -c application/octet-stream
want 204
req GET "/sandboxes/$sb/files?path=/root/large"
want 200
cmp -s "$work/body" "$work/large" || fail "the 64 MiB file came back different ($(wc -c <"$work/body") bytes)"
grown=$(($(hwm) - h0))
[ "$grown" -lt 16384 ] || fail "the service's peak RSS grew by $grown KiB moving a 64 MiB file"
req DELETE "/sandboxes/$sb/files?path=/root/large"
want 204
rm -f "$work/large"
tap "a 64 MiB file put then got back whole, streamed: the service's peak RSS grew by under 16 MiB ($grown KiB)"

req POST "/sandboxes/$sb/exec" -d '{"argv":["echo","forbidden"]}'
want 403
has "$work/body" '"code":"refused"'
req PUT "/sandboxes/$sb/files?path=/root/forbidden" -d x -c application/octet-stream
want 403
grep -q '"outcome":"refused"' "$work/audit.log" || fail "the refusal is not in the audit log"
grep -q '"caller":"alice"' "$work/audit.log" || fail "the token's name is not the audit caller"
"$mayfly" audit verify "$work/audit.log" >"$work/verify" 2>&1 || fail "audit verify: $(cat "$work/verify")"
tap "the approver's refusal is 403 \"refused\", audited with the token's name; the log verifies"

# serve --audit is each sandbox VM's log too: a connection attempt (here one
# its rules refuse: no server needed) is a line of the service's one chain,
# with the sandbox's id. Written by the VM's broker; flushed by its exit.
req POST /sandboxes -d '{"allow_net":["127.0.0.1:9"]}'
want 201
nsb=$(id_of)
req POST "/sandboxes/$nsb/exec" -d '{"argv":["sh","-c","wget -q -O /dev/null http://10.255.0.1:81/x || echo refused"]}'
want 200
has "$work/body" '"data":"refused\n"'
req DELETE "/sandboxes/$nsb"
want 204
grep -q "\"sandbox\":\"$nsb\".*\"host\":\"10.255.0.1\".*\"outcome\":\"refused\"" "$work/audit.log" ||
	fail "no refused 10.255.0.1 record of sandbox $nsb in the service's audit log"
"$mayfly" audit verify "$work/audit.log" >"$work/verify" 2>&1 || fail "audit verify: $(cat "$work/verify")"
tap "serve --audit: a sandbox's connection attempt (refused by its allow_net) is in the service's log with its id; the log verifies"

# ---- pause, resume, fork ----

req POST "/sandboxes/$sb/exec" -d '{"argv":["sh","-c","echo kept >/root/kept; setsid sleep 1000 </dev/null >/dev/null 2>&1 &"]}'
want 200
for round in 1 2; do
	req POST "/sandboxes/$sb/pause"
	want 200
	has "$work/body" '"state":"paused"'
	[ "$(vms)" -le 2 ] || fail "round $round: the paused sandbox's VM still runs ($(vms) VMs, the pool's 2 allowed)"
	[ -e "$state/sb/$sb/paused/state" ] || fail "round $round: no snapshot in $state/sb/$sb/paused"
	req GET "/sandboxes/$sb"
	has "$work/body" '"state":"paused"'
	if [ "$round" = 1 ]; then
		req POST "/sandboxes/$sb/resume"
		want 200
		has "$work/body" '"state":"running"'
	fi
	# Round 2: the exec itself resumes it.
	req POST "/sandboxes/$sb/exec" -d '{"argv":["sh","-c","cat /root/kept; pidof sleep >/dev/null && echo sleeping"]}'
	want 200
	has "$work/body" '{"event":"stdout","data":"kept\n"}'
	has "$work/body" '"data":"sleeping\n"}'
done
[ -e "$state/sb/$sb/paused" ] && fail "the snapshot of a resumed sandbox is left"
tap "pause -> resume -> pause -> resume (the second by an exec): a file and a background process survive"

req POST "/sandboxes/$sb/fork" -d '{"count":4}'
want 201
kids=$(sed 's/"parent"[^,]*,//' "$work/body" | tr '{' '\n' | sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' | tr '\n' ' ')
set -- $kids
[ $# -eq 4 ] || fail "want 4 children, got: $(cat "$work/body")"
# Restored together: each sees the parent's file and writes its own...
for k in $kids; do
	req POST "/sandboxes/$k/exec" -d "{\"argv\":[\"sh\",\"-c\",\"cat /root/kept; echo $k >/root/mine-$k\"]}"
	want 200
	has "$work/body" '"data":"kept\n"'
done
# ... and sees no other child's.
for k in $kids; do
	req POST "/sandboxes/$k/exec" -d '{"argv":["sh","-c","ls /root | grep -c ^mine-"]}'
	want 200
	has "$work/body" '"data":"1\n"'
done
req POST "/sandboxes/$sb/exec" -d '{"argv":["sh","-c","ls /root | grep -c ^mine- || true"]}'
want 200
has "$work/body" '"data":"0\n"'
for f in "$state"/forks/*; do
	[ -e "$f" ] && fail "a fork's snapshot is left: $f"
done
for k in $kids; do
	req DELETE "/sandboxes/$k"
	want 204
done
tap "fork into 4 children (restored together): each sees the parent's files and only its own; the parent goes on"

req POST /sandboxes -d '{"idle_timeout":2}'
want 201
idle=$(id_of)
req POST "/sandboxes/$idle/exec" -d '{"argv":["sh","-c","echo before >/root/b"]}'
want 200
i=0
paused=no
while [ $i -lt 60 ]; do
	sleep 1
	req GET "/sandboxes/$idle"
	grep -q '"state":"paused"' "$work/body" && { paused=yes; break; }
	i=$((i + 1))
done
[ $paused = yes ] || fail "not paused after 60 s with idle_timeout 2: $(cat "$work/body")"
req GET "/sandboxes/$idle/files?path=/root/b"
want 200
grep -q before "$work/body" || fail "the file is not there after the auto-resume"
req GET "/sandboxes/$idle"
has "$work/body" '"state":"running"'
req DELETE "/sandboxes/$idle"
want 204
tap "idle_timeout pauses an idle sandbox; the next call resumes it"

# ---- bad requests ----

req POST /sandboxes -d '{"cpus":'
want 400
has "$work/body" 'malformed JSON'
req POST /sandboxes -d '{"gpus":1}'
want 400
has "$work/body" 'unknown member \"gpus\"'
req POST /sandboxes -d '{"cpus":7}'
want 400
has "$work/body" "cpus 7 differs from template 'default'"
req POST /sandboxes -d '{"mem":12345}'
want 400
has "$work/body" "mem 12345 differs from template 'default'"
req POST /sandboxes -d '{}' -c text/plain
want 415
head -c 17000000 /dev/zero >"$work/big"
req POST "/sandboxes/$sb/exec" -f "$work/big"
want 413
req GET /sandboxes/0000000000000000
want 404
has "$work/body" "no sandbox '0000000000000000'"
req PATCH /sandboxes
want 405
req GET "/sandboxes/$sb/files?path=relative"
want 400
tap "bad requests: malformed JSON, unknown members, a cpus/mem other than the template's 400, 415, 413, 404, 405, a relative path 400"

req DELETE "/sandboxes/$sb"
want 204
req GET "/sandboxes/$sb"
want 404
[ -e "$state/sb/$sb" ] && fail "its state directory is still there"
tap "DELETE removes the sandbox, its VM and its state"

req GET /metrics
want 200
has "$work/body" 'mayfly_serve_pool_target{template="default"} 2'
has "$work/body" 'mayfly_serve_failures_total{cause="refused"} 2'
has "$work/body" 'mayfly_serve_create_seconds_count '
has "$work/body" 'mayfly_serve_exec_seconds_bucket{le="+Inf"}'
tap "/metrics: pool, failures by cause, latency histograms"

# ---- load: 8 clients, create -> exec -> files -> (pause -> resume -> fork) -> delete ----

# The service's open descriptors, threads and resident KiB: flat across the load.
svc_gauges() {
	set -- /proc/"$spid"/fd/*
	echo "$# $(sed -n 's/^Threads:[[:space:]]*//p' /proc/"$spid"/status) $(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' /proc/"$spid"/status)"
}
# shellcheck disable=SC2046 # three numbers, split on purpose
set -- $(svc_gauges)
fds0=$1 threads0=$2 rss0=$3
t0=$(date +%s)
c=1
while [ $c -le 8 ]; do
	(
		# call WANT METHOD URL [options]: the body in $b, any other status ends the client.
		b=$work/l$c.body
		call() {
			w=$1
			m=$2
			u=$3
			shift 3
			s=$("$client" -t "$token" -o "$b" "$@" "$sock" "$m" "$u") || s=none
			[ "$s" = "$w" ] || { echo "cycle $k: $m $u: $s, want $w: $(head -c 300 "$b")"; exit 1; }
		}
		k=1
		while [ $k -le "$cycles" ]; do
			call 201 POST /sandboxes -d '{}'
			id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$b")
			[ -n "$id" ] || { echo "cycle $k: no sandbox: $(head -c 300 "$b")"; exit 1; }
			call 200 POST "/sandboxes/$id/exec" -d "{\"argv\":[\"echo\",\"c$c-k$k\"]}"
			grep -qF "\"data\":\"c$c-k$k\\n\"" "$b" && grep -q '"code":0' "$b" ||
				{ echo "cycle $k: wrong exec result: $(head -c 300 "$b")"; exit 1; }
			echo "file of client $c, cycle $k" >"$work/l$c.up"
			call 204 PUT "/sandboxes/$id/files?path=/root/f" -f "$work/l$c.up" -c application/octet-stream
			call 200 GET "/sandboxes/$id/files?path=/root/f"
			cmp -s "$b" "$work/l$c.up" || { echo "cycle $k: the file came back other: $(head -c 100 "$b")"; exit 1; }
			# Two clients save: a save writes the guest's RAM (tens of MiB)
			# into the state directory, and L1's /tmp is its 2 GiB of RAM.
			if [ $((k % 5)) -eq 0 ] && [ $c -le 2 ]; then
				call 200 POST "/sandboxes/$id/pause"
				call 200 POST "/sandboxes/$id/exec" -d '{"argv":["cat","/root/f"]}'
				grep -q "cycle $k" "$b" || { echo "cycle $k: the file is gone after a resume"; exit 1; }
				call 201 POST "/sandboxes/$id/fork" -d '{"count":1}'
				kid=$(sed 's/"parent"[^,]*,//' "$b" | tr '{' '\n' | sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' | grep -v "$id" | head -n 1)
				call 200 POST "/sandboxes/$kid/exec" -d '{"argv":["cat","/root/f"]}'
				grep -q "cycle $k" "$b" || { echo "cycle $k: the fork's child lacks the file"; exit 1; }
				call 204 DELETE "/sandboxes/$kid"
			fi
			# A line now and then: the harness's watchdog wants one within 150 s.
			[ $((k % 5)) -eq 0 ] && echo "# load: client $c, $k cycles" >&3
			call 204 DELETE "/sandboxes/$id"
			k=$((k + 1))
		done
	) 3>&1 >"$work/l$c.log" 2>&1 &
	eval "lp$c=\$!"
	c=$((c + 1))
done
c=1
while [ $c -le 8 ]; do
	eval "wait \$lp$c" || fail "client $c: $(cat "$work/l$c.log")"
	echo "# load: client $c done ($(($(date +%s) - t0)) s)"
	c=$((c + 1))
done
secs=$(($(date +%s) - t0))
req GET /sandboxes
has "$work/body" '{"sandboxes":[]}'
sleep 2
[ "$(vms)" -le 2 ] || fail "$(vms) VM processes, want at most the pool's 2"
[ "$(sandboxes_on_disk)" -le 2 ] || fail "$(sandboxes_on_disk) sandbox directories, want at most the pool's 2"
# Every exec was approved and audited by 8 clients at once: one chain still.
"$mayfly" audit verify "$work/audit.log" >"$work/verify" 2>&1 || fail "audit verify: $(cat "$work/verify")"
# shellcheck disable=SC2046 # three numbers, split on purpose
set -- $(svc_gauges)
echo "# the service before and after the load: $fds0 -> $1 fds, $threads0 -> $2 threads, $rss0 -> $3 KiB resident"
[ "$1" -le "$fds0" ] || fail "the service's descriptors grew: $fds0 -> $1"
[ "$2" -le "$threads0" ] || fail "the service's threads grew: $threads0 -> $2"
# A sanitizer build's allocator keeps freed memory in quarantine (up to
# 256 MiB by design): its RSS is printed, the release binary's is held.
grep -q __asan_init "$mayfly" || [ "$3" -le $((rss0 + 16384)) ] ||
	fail "the service's resident memory grew by over 16 MiB: $rss0 -> $3 KiB"
tap "8 clients x $cycles cycles of create, exec, put, get (two with a pause, resume and fork every 5th), delete ($((8 * cycles)) in $secs s): every result right, only the pool left, the audit log verifies, the service's fds ($fds0 -> $1), threads ($threads0 -> $2) and RSS ($rss0 -> $3 KiB) flat"

# ---- a restart: the sandboxes outlive the service ----

# keep_has ID TEXT: the sandbox's /root/keep, its $KEEP and its background
# sleep, in one line.
keep_has() {
	req POST "/sandboxes/$1/exec" -d '{"argv":["sh","-c","echo $(cat /root/keep) ${KEEP:-none} $(pidof sleep >/dev/null && echo sleeping)"]}'
	want 200
	has "$work/body" "{\"event\":\"stdout\",\"data\":\"$2\\n\"}"
}

req POST /sandboxes -d '{"env":{"KEEP":"kept"},"ttl":3600}'
want 201
run1=$(id_of)
req POST "/sandboxes/$run1/exec" -d '{"argv":["sh","-c","echo one >/root/keep; setsid sleep 1000 </dev/null >/dev/null 2>&1 &"]}'
want 200
req POST /sandboxes -d '{}'
want 201
par1=$(id_of)
req POST "/sandboxes/$par1/exec" -d '{"argv":["sh","-c","echo two >/root/keep"]}'
want 200
req POST "/sandboxes/$par1/pause"
want 200
kill -TERM "$spid"
wait_gone "$spid" 60 || fail "the service did not exit within 60 s of SIGTERM"
wait "$spid"
rc=$?
spid=""
[ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM, want 0"
sleep 1
[ "$(vms)" -eq 1 ] || fail "$(vms) VM processes after the drain, want the running sandbox's 1 (the pool's gone)"
[ -e "$sock" ] && fail "the socket is left"
[ "$(sandboxes_on_disk)" -eq 2 ] || fail "$(sandboxes_on_disk) sandbox directories after the drain, want 2"
tap "SIGTERM drains: exit 0; the pool's VMs and the socket go, the sandboxes stay"

start_service || bail "mayfly serve did not restart: $(tail -n 5 "$work/serve.err")"
grep -q "took over 2 sandboxes left by a previous service: 1 running, 1 paused" "$work/serve.err" ||
	fail "no take-over line: $(tail -n 3 "$work/serve.err")"
req GET "/sandboxes/$run1"
want 200
has "$work/body" '"state":"running"'
has "$work/body" '"ttl":3600'
req GET "/sandboxes/$par1"
has "$work/body" '"state":"paused"'
keep_has "$run1" "one kept sleeping"
keep_has "$par1" "two none"
tap "a restarted service takes them over: the running one with its files, processes and environment; the paused one resumes"

kill -9 "$spid"
wait "$spid" 2>/dev/null
spid=""
sleep 1
[ "$(vms)" -eq 2 ] || fail "$(vms) VM processes after a kill -9 of the service, want the 2 sandboxes': $(mayfly_procs)"
start_service || bail "mayfly serve did not start after a kill: $(tail -n 5 "$work/serve.err")"
keep_has "$run1" "one kept sleeping"
keep_has "$par1" "two none"
tap "kill -9 of the service: its sandboxes' VMs go on, and the next start takes them over"

req DELETE "/sandboxes/$run1"
want 204
req DELETE "/sandboxes/$par1"
want 204
drain_empty "the deletes and a drain"
tap "deleted sandboxes leave nothing after a drain: no VM, cgroup, socket or state"

# ---- --ephemeral: sandboxes end with the service ----

# The default snapshot again, as a second template with a pool of its own.
tid=$(sed -n 's/.*(template \([0-9a-zA-Z_.-]*\) and .*/\1/p' "$work/serve.err" | head -n 1)
[ -d "$MAYFLY_CACHE/snapshots/$tid" ] || bail "no default snapshot '$tid' in $MAYFLY_CACHE/snapshots"
start_service --ephemeral --pool 1 --template "alt=$MAYFLY_CACHE/snapshots/$tid" ||
	bail "mayfly serve did not restart: $(tail -n 5 "$work/serve.err")"
req POST /sandboxes -d '{"template":"alt"}'
want 201
has "$work/body" "\"template\":\"$tid\""
req POST /sandboxes -d '{"template":"nope"}'
want 400
has "$work/body" "no template 'nope' (this service has: default alt)"
req GET /metrics
has "$work/body" 'mayfly_serve_pool_target{template="alt"} 1'
has "$work/body" 'mayfly_serve_pool_ready{template="default"}'
drain_empty "an ephemeral drain"
tap "--template NAME=DIR: a create names it, an unknown one is 400, /metrics shows its pool; --ephemeral drains every VM"

start_service --ephemeral || bail "mayfly serve --ephemeral did not start: $(tail -n 5 "$work/serve.err")"
req POST /sandboxes -d '{}'
want 201
kill -9 "$spid"
wait "$spid" 2>/dev/null
spid=""
i=0
while [ "$(vms)" -gt 0 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ "$(vms)" -eq 0 ] || fail "$(vms) VM processes outlived the killed service"
tap "kill -9 of an --ephemeral service: its VMs die with it"

[ "$(sandboxes_on_disk)" -gt 0 ] || fail "nothing on disk to clean (the test would prove nothing)"
start_service --ephemeral || bail "mayfly serve did not start after a kill: $(tail -n 5 "$work/serve.err")"
grep -q "cleaned [0-9]* sandbox" "$work/serve.err" || fail "no clean-up line"
[ "$(sandboxes_on_disk)" -eq 0 ] || fail "left from before: $(ls "$state/sb")"
kill -TERM "$spid"
wait "$spid"
spid=""
tap "a restarted --ephemeral service cleans what the killed one left"

# ---- a full state disk: pause and fork fail clearly, the sandbox goes on ----

# The state on a 32 MiB tmpfs, filled but for 1 MiB: a record fits, a
# snapshot of the guest's memory does not.
small=$work/small
mkdir -p "$small" && mount -t tmpfs -o size=32m tmpfs "$small" || bail "cannot mount a tmpfs on $small"
full_state() {
	dd if=/dev/zero of="$small/fill" bs=1M count=31 2>/dev/null
	sync
}
free_kib() {
	df -k "$small" | tail -n 1 | sed 's/  */ /g' | cut -d' ' -f4
}
state_was=$state
sock_was=$sock
state=$small/state
sock=$small/api.sock
start_service --ephemeral || bail "mayfly serve on a tmpfs did not start: $(tail -n 5 "$work/serve.err")"
req POST /sandboxes -d '{}'
want 201
sb=$(id_of)
full_state
before=$(free_kib)
req POST "/sandboxes/$sb/pause"
want 500
has "$work/body" "No space left on device"
req GET "/sandboxes/$sb"
has "$work/body" '"state":"running"'
req POST "/sandboxes/$sb/exec" -d '{"argv":["echo","still-here"]}'
want 200
has "$work/body" '{"event":"stdout","data":"still-here\n"}'
for f in "$state/sb/$sb"/paused*; do
	[ -e "$f" ] && fail "a partial snapshot is left: $f"
done
[ "$(free_kib)" -ge "$before" ] || fail "the failed pause kept space: $(free_kib) KiB free, $before before"
# A file goes between the client and the guest, never through the state.
dd if=/dev/urandom of="$work/mib" bs=1M count=1 2>/dev/null
req PUT "/sandboxes/$sb/files?path=/root/mib" -f "$work/mib" -c application/octet-stream
want 204
req GET "/sandboxes/$sb/files?path=/root/mib"
want 200
cmp -s "$work/body" "$work/mib" || fail "the file got back differs from the one put"
grep -q "^{\"id\":\"$sb\",\"state\":\"running\",.*}\$" "$state/sb/$sb/record.json" ||
	fail "the sandbox's record is damaged: $(head -c 200 "$state/sb/$sb/record.json")"
tap "a full state disk: pause is 500 (No space left on device), the sandbox runs on, no partial snapshot, space given back; a file PUT and GET work, the record intact"

req POST "/sandboxes/$sb/fork" -d '{"count":2}'
want 500
has "$work/body" "No space left on device"
[ -n "$(ls -A "$state/forks" 2>/dev/null)" ] && fail "a partial fork snapshot is left: $(ls "$state/forks")"
req GET /sandboxes
[ "$(grep -o '"id"' "$work/body" | wc -l)" -eq 1 ] || fail "a failed fork left children: $(head -c 300 "$work/body")"
[ "$(free_kib)" -ge "$before" ] || fail "the failed fork kept space: $(free_kib) KiB free, $before before"
rm -f "$small/fill"
req POST "/sandboxes/$sb/pause"
want 200
req POST "/sandboxes/$sb/exec" -d '{"argv":["echo","resumed"]}'
want 200
has "$work/body" '{"event":"stdout","data":"resumed\n"}'
tap "a full state disk: fork is 500, no child and no snapshot left; with room again, pause and resume work"

# A sandbox's own disk full: its copy-on-write overlay (disk_quota 16 MiB)
# holds its quota, so the guest's writes fail with I/O errors; the service
# asks the VM why.
req POST /sandboxes -d '{"disk_quota":16777216}'
want 201
q=$(id_of)
printf 'old contents\n' >"$work/old"
req PUT "/sandboxes/$q/files?path=/root/keep.txt" -f "$work/old" -c application/octet-stream
want 204
req POST "/sandboxes/$q/exec" -d '{"argv":["sh","-c","dd if=/dev/zero of=/root/fill bs=1M count=64 conv=fsync 2>/dev/null; echo dd=$?"]}'
want 200
has "$work/body" 'dd=1'
req PUT "/sandboxes/$q/files?path=/root/keep.txt" -f "$work/mib" -c application/octet-stream
want 507
has "$work/body" '"code":"no_space"'
has "$work/body" "disk quota is used up"
req GET "/sandboxes/$q/files?path=/root/keep.txt"
want 200
cmp -s "$work/body" "$work/old" || fail "the failed PUT changed the file: $(head -c 100 "$work/body")"
req PUT "/sandboxes/$q/files?path=/tmp/mib" -f "$work/mib" -c application/octet-stream
want 204
req POST "/sandboxes/$q/exec" -d '{"argv":["echo","still-here"]}'
want 200
has "$work/body" '{"event":"stdout","data":"still-here\n"}'
req DELETE "/sandboxes/$q"
want 204
tap "a sandbox's own disk full (disk_quota 16 MiB): a PUT is 507 no_space saying why, the old file kept, the sandbox runs on (its tmpfs takes the file)"

kill -TERM "$spid"
wait "$spid"
spid=""
state=$state_was
sock=$sock_was
umount "$small" || fail "cannot unmount $small (something of the service's still in it)"
tap "the service on a full disk drains; nothing of it holds the file system"

# ---- a real OOM kill: the VM's cgroup's memory.max cut under its use ----

start_service --audit "$work/oom-audit.log" || bail "mayfly serve did not start: $(tail -n 5 "$work/serve.err")"
req POST /sandboxes -d '{}'
want 201
victim=$(id_of)
req POST /sandboxes -d '{}'
want 201
other=$(id_of)
cg=$(ls -d /sys/fs/cgroup/mayfly/vm-"$victim"-* 2>/dev/null | head -n 1)
if [ -z "$cg" ] || [ ! -w "$cg/memory.max" ]; then
	fail "no VM cgroup with a memory.max for $victim"
else
	# Far under what the VMM holds (its heap, the guest's written pages):
	# the kernel cannot reclaim down to it and its OOM killer takes the VM.
	echo 1M >"$cg/memory.max" 2>/dev/null || true
	i=0
	while [ $i -lt 100 ]; do
		req GET "/sandboxes/$victim"
		grep -q '"state":"exited"' "$work/body" && break
		sleep 0.2
		i=$((i + 1))
	done
	has "$work/body" '"state":"exited"'
	has "$work/body" "killed by its memory limit (the cgroup's OOM killer, memory.max)"
	req GET /metrics
	grep -q '^mayfly_serve_vm_exits_total{cause="memory"} 1$' "$work/body" ||
		fail "/metrics: $(grep vm_exits_total "$work/body" | tr '\n' ' ')"
	grep '"vm_exit"' "$work/oom-audit.log" | grep "$victim" | grep -q "memory limit" ||
		fail "no vm_exit audit record for $victim: $(tail -c 300 "$work/oom-audit.log")"
	req POST "/sandboxes/$other/exec" -d '{"argv":["echo","unharmed"]}'
	want 200
	has "$work/body" '{"event":"stdout","data":"unharmed\n"}'
	req GET /health
	want 200
fi
req DELETE "/sandboxes/$victim"
want 204
req DELETE "/sandboxes/$other"
want 204
drain_empty "an OOM kill and the deletes"
tap "a VM's cgroup OOM kill (memory.max cut under its use): that sandbox exited, the reason in the API, /metrics and the audit log; the service and another sandbox go on"

# ---- fault injection: the service killed at random points, restarted, checked ----

kills=${E2E_SERVE_KILLS:-20}
: >"$work/fi.created"
: >"$work/fi.deleted"
: >"$work/fi.deleting"
: >"$work/fi.ops"
# rnd N: a random number below N.
rnd() {
	echo $(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % $1))
}
# fi_op ID: one call (a random kind) whose result the client records: the
# ids it saw created (201) and deleted (204).
fi_op() {
	o=$work/fi.body
	kind=$(rnd 7)
	echo "op $kind (0-1 create, 2 exec, 3 put, 4 pause, 5 fork, 6 delete) on '$1'" >>"$work/fi.ops"
	case $kind in
	0|1) st=$("$client" -t "$token" -o "$o" -d '{"env":{"K":"v"}}' "$sock" POST /sandboxes) &&
		[ "$st" = 201 ] && sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$o" >>"$work/fi.created" ;;
	2) [ -n "$1" ] && "$client" -t "$token" -o "$o" -d '{"argv":["sh","-c","echo x >>/root/log"]}' "$sock" POST "/sandboxes/$1/exec" ;;
	3) [ -n "$1" ] && "$client" -t "$token" -o "$o" -f "$work/up" -c application/octet-stream "$sock" PUT "/sandboxes/$1/files?path=/root/p" ;;
	4) [ -n "$1" ] && "$client" -t "$token" -o "$o" "$sock" POST "/sandboxes/$1/pause" ;;
	5) [ -n "$1" ] && st=$("$client" -t "$token" -o "$o" -d '{"count":1}' "$sock" POST "/sandboxes/$1/fork") &&
		[ "$st" = 201 ] && sed 's/"parent"[^,]*,//' "$o" | tr '{' '\n' |
		sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' | grep -v "$1" >>"$work/fi.created" ;;
	# Asked for before it is sent: a kill may cut it after the service
	# deleted the sandbox but before the 204 came back.
	6) [ -n "$1" ] && echo "$1" >>"$work/fi.deleting" &&
		st=$("$client" -t "$token" -o "$o" "$sock" DELETE "/sandboxes/$1") &&
		[ "$st" = 204 ] && echo "$1" >>"$work/fi.deleted" ;;
	esac >/dev/null 2>&1
}
listed() {
	sed 's/},{/}\n{/g' "$work/body" | sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'
}
start_service || bail "mayfly serve did not start for the fault loop: $(tail -n 5 "$work/serve.err")"
t0=$(date +%s)
kill_n=1
while [ $kill_n -le "$kills" ]; do
	req GET /sandboxes
	ids=$(listed)
	count=$(echo "$ids" | grep -c .)
	# Few sandboxes: mostly creates; many: mostly deletes (bounded by the L1's memory).
	pick=""
	[ "$count" -gt 0 ] && pick=$(echo "$ids" | sed -n "$(($(rnd "$count") + 1))p")
	if [ "$count" -ge 6 ]; then
		st=$("$client" -t "$token" -o "$work/fi.body" "$sock" DELETE "/sandboxes/$pick") &&
			[ "$st" = 204 ] && echo "$pick" >>"$work/fi.deleted"
	fi
	fi_op "$pick" &
	op=$!
	sleep "0.$(rnd 10)$(rnd 10)"
	kill -9 "$spid"
	wait "$spid" 2>/dev/null
	spid=""
	wait "$op" 2>/dev/null
	start_service || { fail "kill $kill_n: the service did not come back: $(tail -n 3 "$work/serve.err")"; break; }
	req GET /sandboxes
	[ "$st" = 200 ] || { fail "kill $kill_n: GET /sandboxes is $st"; break; }
	listed >"$work/fi.listed"
	while read -r id; do
		grep -qx "$id" "$work/fi.deleted" "$work/fi.deleting" && continue
		grep -qx "$id" "$work/fi.listed" || fail "kill $kill_n: sandbox $id, created, is not listed (in flight: $(tail -n 1 "$work/fi.ops"))"
	done <"$work/fi.created"
	while read -r id; do
		grep -qx "$id" "$work/fi.listed" && fail "kill $kill_n: sandbox $id, deleted, is listed again"
	done <"$work/fi.deleted"
	grep -q '"state":"damaged"' "$work/body" && fail "kill $kill_n: a sandbox is damaged: $(head -c 400 "$work/body")"
	for f in /proc/[0-9]*/cmdline; do
		{ tr '\0' ' ' <"$f" && echo; } 2>/dev/null |
			sed -n "s|.*boot --snapshot .* --vsock $state/sb/\([0-9a-f]*\)/vm/vsock.*|\1|p"
	done | sort -u >"$work/fi.vms"
	while read -r id; do
		grep -qx "$id" "$work/fi.listed" || fail "kill $kill_n: VM process of $id runs without a listed sandbox"
	done <"$work/fi.vms"
	for d in "$state"/sb/*; do
		[ -d "$d" ] || continue
		grep -qx "${d##*/}" "$work/fi.listed" || fail "kill $kill_n: $d has no listed sandbox"
	done
	[ $((kill_n % 10)) -eq 0 ] && echo "# fault loop: $kill_n kills ($(($(date +%s) - t0)) s)"
	kill_n=$((kill_n + 1))
done
secs=$(($(date +%s) - t0))
req GET /sandboxes
for id in $(listed); do
	req DELETE "/sandboxes/$id"
	want 204
done
drain_empty "deleting every sandbox"
tap "$kills kill -9s of the service at random points of create, exec, put, pause, resume, fork and delete ($secs s): after each restart the API answers, every sandbox seen created is listed, none seen deleted is, none damaged, no VM or directory without its sandbox"

tap_end
