#!/bin/sh
# shellcheck disable=SC2016  # guest commands are single-quoted on purpose
# run-net-tests.sh - --allow-net end to end with the Debian agent image: curl in the
# guest through the agent's proxy to loopback servers here (netserve), refusals
# with their reasons, the DNS-rebinding and SNI defences, no network without a
# rule, and a hostile guest. TAP on stdout.
#
# usage: run-net-tests MAYFLY GUESTDIR FILESDIR
#   MAYFLY    the mayfly binary
#   GUESTDIR  the default guest (vmlinux at least)
#   FILESDIR  netserve (tests/e2e/netserve.c), ca.pem (a test CA), server.pem and
#             server.key (its certificate for files.test and evil.test), hostile.py,
#             www/ (make-net-files: a pip index and a git repository, served under
#             https://files.test/srv/)
#   $MAYFLY_TEST_DATA/agent.ext4  the agent image (tests/run-in-kvm --data)
#
# Every server listens on 127.0.0.1 here; the guest names files.test, which
# --resolve maps to 127.0.0.1 (never real DNS). Loopback is refused unless a rule
# names it: the runs that should connect add --allow-net 127.0.0.1.
# Environment: E2E_CASE_TIMEOUT seconds for one mayfly run (default 300);
# NET_E2E_ATTEMPTS the hostile client's refused connections (default 2000: about
# a minute in the emulated harness; the unit suite makes 10,000 against the proxy).
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run ("Bail out!").
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.

set -u

if [ $# -ne 3 ]; then
	echo "usage: run-net-tests MAYFLY GUESTDIR FILESDIR" >&2
	exit 2
fi
mayfly=$1
guestdir=$2
files=$3
case_timeout=${E2E_CASE_TIMEOUT:-300}
attempts=${NET_E2E_ATTEMPTS:-2000}
image=${MAYFLY_TEST_DATA:-}/agent.ext4

bail() {
	echo "Bail out! $*"
	exit 3
}
[ -x "$mayfly" ] || bail "mayfly binary $mayfly is missing or not executable"
[ -r "$guestdir/vmlinux" ] || bail "$guestdir/vmlinux is missing (tools/build-guest)"
[ -n "${MAYFLY_TEST_DATA:-}" ] && [ -r "$image" ] ||
	bail "no agent image at \$MAYFLY_TEST_DATA/agent.ext4 (tools/build-guest --agent)"
[ -c /dev/kvm ] || bail "no /dev/kvm here"
[ "$(id -u)" = 0 ] || bail "the HTTPS server listens on port 443: run as root (the harness's L1 is)"

work=$(mktemp -d "${TMPDIR:-/tmp}/net-tests.XXXXXX") || bail "mktemp failed"
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "$work/guest"
ln -s "$(cd "$guestdir" && pwd)/vmlinux" "$work/guest/vmlinux"
ln -s "$image" "$work/guest/agent.ext4"
MAYFLY_GUEST_DIR=$work/guest
MAYFLY_CACHE=$work/cache
export MAYFLY_GUEST_DIR MAYFLY_CACHE

# The harness's L1 leaves lo down: a bind to 127.0.0.1 works, a connect does not
# (ENETUNREACH). Up, as any host has it.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null ||
	bail "cannot bring lo up here"
# The servers: HTTPS on 443 (the port the SNI check applies to), plain HTTP on 8080.
cp "$files/netserve" "$work/netserve" && chmod +x "$work/netserve" || bail "cannot copy netserve"
"$work/netserve" -d "$files/www" 443 "$files/server.pem" "$files/server.key" 2>"$work/netserve-tls.err" &
pids="$pids $!"
"$work/netserve" 8080 2>"$work/netserve-http.err" &
pids="$pids $!"
sleep 1
kill -0 $pids 2>/dev/null || bail "netserve did not start: $(cat "$work"/netserve-*.err)"

n=0
failed=0
rc=0
verb=run       # the mayfly command vm() runs (words), and its stdin
vm_in=/dev/null
vm() {
	s=$(cut -d' ' -f1 /proc/uptime)
	# shellcheck disable=SC2086  # $verb is one or two words
	timeout -k 5 "$case_timeout" "$mayfly" $verb "$@" <"$vm_in" >"$work/raw" 2>"$work/err"
	rc=$?
	tr -d '\r' <"$work/raw" >"$work/out"
	e=$(cut -d' ' -f1 /proc/uptime)
	echo "# timing: $(echo "$s $e" | awk '{ printf "%.1f", $2 - $1 }') s: mayfly $verb $*"
}
# point NAME WANT_RC ARGS... -- CMD: `mayfly run ARGS -- CMD` exits WANT_RC; then
# each `want LINE` / `want_err TEXT` after it checks stdout / stderr.
point() {
	name=$1 want_rc=$2
	shift 2
	vm "$@"
	n=$((n + 1))
	ok=1
	why=""
	[ "$rc" = "$want_rc" ] || { ok=0; why="exit $rc, wanted $want_rc"; }
}
want() {
	grep -qxF -- "$1" "$work/out" || { ok=0; why="$why; no stdout line '$1'"; }
}
want_in() {
	grep -qF -- "$1" "$work/out" || { ok=0; why="$why; stdout lacks '$1'"; }
}
want_err() {
	grep -qF -- "$1" "$work/err" || { ok=0; why="$why; stderr lacks '$1'"; }
}
done_point() {
	if [ "$ok" = 1 ]; then
		echo "ok $n - $name"
		return
	fi
	echo "not ok $n - $name # $why"
	tail -n 20 "$work/out" | sed 's/^/#   > /'
	tail -n 20 "$work/err" | sed 's/^/#   ! /'
	failed=$((failed + 1))
}

allow="--allow-net files.test:443 --allow-net files.test:8080 --allow-net 127.0.0.1 --resolve files.test:127.0.0.1"
ca="$files/ca.pem:/root/ca.pem"

echo "1..16"

# shellcheck disable=SC2086  # $allow is several words on purpose
point "no --allow-net: only lo, no proxy, nothing reachable" 0 \
	-- sh -c 'ls /sys/class/net; echo "proxy=[$HTTP_PROXY]"; curl -sS -m 5 http://127.0.0.1:8080/x 2>/dev/null; echo "curl=$?"'
want "lo"
want "proxy=[]"
want "curl=7"
[ "$(grep -c . "$work/out")" = 3 ] || { ok=0; why="$why; an interface besides lo"; }
done_point

# shellcheck disable=SC2086
point "an allowed name and port over HTTPS and plain HTTP, curl through the proxy" 0 $allow \
	--put "$ca" -- sh -c 'echo "$HTTPS_PROXY"; curl -sS -m 30 --cacert /root/ca.pem https://files.test/hello &&
		curl -sS -m 30 http://files.test:8080/plain'
want "http://127.0.0.1:3128"
want "netserve /hello"
want "netserve /plain"
done_point

# shellcheck disable=SC2086
point "a name or port not allowed is refused with the reason" 0 $allow \
	-- sh -c 'curl -sS -m 30 http://other.test:8080/x; curl -sS -m 30 http://files.test:8081/x;
		curl -sS -m 30 -o /dev/null https://other.test/ 2>&1; echo done'
want_in "mayfly: other.test port 8080 is not allowed by any --allow-net rule"
want_in "mayfly: files.test port 8081 is not allowed by any --allow-net rule"
want_in "403"
want_err "net: refused"
done_point

point "a name resolving to 127.0.0.1 is refused unless a rule names 127.0.0.1" 0 \
	--allow-net files.test:8080 --resolve files.test:127.0.0.1 \
	-- sh -c 'curl -sS -m 30 http://files.test:8080/x'
want_in "mayfly: files.test resolves to 127.0.0.1 (loopback), which no --allow-net rule names"
done_point

# shellcheck disable=SC2086
point "a TLS server name other than the CONNECT host is refused" 0 $allow --put "$ca" \
	-- sh -c 'openssl s_client -proxy 127.0.0.1:3128 -connect files.test:443 -servername evil.test \
		-CAfile /root/ca.pem </dev/null >/dev/null 2>&1; echo "s_client=$?";
		openssl s_client -proxy 127.0.0.1:3128 -connect files.test:443 -servername files.test \
		-CAfile /root/ca.pem </dev/null 2>/dev/null | grep -q "Verify return code: 0 (ok)" && echo verified'
want "s_client=1"
want "verified"
want_err "TLS server name evil.test differs from the CONNECT host"
done_point

# shellcheck disable=SC2086
point "hostile: $attempts attempts, a 1 MiB CONNECT line, a client that never reads; the host holds" 0 \
	$allow --put "$files/hostile.py:/root/hostile.py" --put "$ca" --env "ATTEMPTS=$attempts" \
	-- sh -c 'python3 /root/hostile.py && curl -sS -m 30 --cacert /root/ca.pem https://files.test/after'
want "refused $attempts"
want "long line: 431"
want "stalled reader: host alive"
want "netserve /after"
lines=$(wc -l <"$work/err")
[ "$lines" -lt 200 ] || { ok=0; why="$why; $lines stderr lines: the log is not rate-limited"; }
done_point

# shellcheck disable=SC2086
point "python (pip's urllib) and git take the proxy from the environment" 0 $allow \
	-- sh -c 'python3 -c "import urllib.request as u; print(u.urlopen(\"http://files.test:8080/py\").read().decode().strip())";
		git ls-remote http://other.test:8080/repo.git 2>&1 | grep -o "403" | head -n 1'
want "netserve /py"
want "403"
done_point

# ---- beyond run: snapshot create, a restore, mcp -------------------------------
# Rules are each run's own, never saved: snapshot create's serve its --setup
# commands, and a restore has the network only with its own --allow-net.
snap=$work/snap
verb="snapshot create"
# shellcheck disable=SC2086
point "snapshot create --allow-net: a --setup command reaches the allowed server" 0 $allow \
	--setup 'curl -sS -m 30 http://files.test:8080/setup | tee /root/setup.txt' --out "$snap"
want_err "netserve /setup"
[ -f "$snap/state" ] || { ok=0; why="$why; no snapshot in $snap"; }
done_point

verb=run
# shellcheck disable=SC2086
point "a restored run with --allow-net reaches the allowed server" 0 --snapshot "$snap" $allow \
	-- sh -c 'cat /root/setup.txt; curl -sS -m 30 http://files.test:8080/restored'
want "netserve /setup"
want "netserve /restored"
done_point

point "a restored run without --allow-net reaches nothing, its snapshot's rules notwithstanding" 0 \
	--snapshot "$snap" -- sh -c 'echo "proxy=[$HTTP_PROXY]"; curl -sS -m 5 -x http://127.0.0.1:3128 \
		http://files.test:8080/x 2>/dev/null; echo "curl=$?"; curl -sS -m 5 http://127.0.0.1:8080/x \
		2>/dev/null; echo "direct=$?"'
want "proxy=[]"
want "curl=7"
want "direct=7"
done_point

cat >"$work/mcp.in" <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"net","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"curl -sS -m 30 http://files.test:8080/mcp; curl -sS -m 30 http://other.test:8080/x"}}}
JSON
verb=mcp
vm_in=$work/mcp.in
# shellcheck disable=SC2086
point "mcp --allow-net: its sandbox reaches the allowed server, not another" 0 $allow
want_in "netserve /mcp"
want_in "other.test port 8080 is not allowed by any --allow-net rule"
done_point
verb=run
vm_in=/dev/null

# The broker (forked before the jail, keeping the host's network) runs under its
# own seccomp filter, as the jail's uid, with no_new_privs.
n=$((n + 1))
name="the network broker runs filtered (Seccomp 2), unprivileged, no_new_privs"
ok=1
why=""
# shellcheck disable=SC2086
timeout -k 5 "$case_timeout" "$mayfly" run $allow -- sleep 30 </dev/null >"$work/out" 2>"$work/err" &
bg=$!
broker=""
i=0
while [ -z "$broker" ] && [ "$i" -lt 90 ] && kill -0 "$bg" 2>/dev/null; do
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = mayfly-broker ] && broker=$p
	done
	[ -n "$broker" ] || sleep 1
	i=$((i + 1))
done
if [ -z "$broker" ]; then
	ok=0
	why="no mayfly-broker process while the run lived"
else
	grep -q "^Seccomp:[[:space:]]*2$" "$broker/status" || { ok=0; why="$why; $(grep Seccomp: "$broker/status")"; }
	grep -q "^NoNewPrivs:[[:space:]]*1$" "$broker/status" || { ok=0; why="$why; no NoNewPrivs"; }
	grep -q "^Uid:[[:space:]]*65534[[:space:]]" "$broker/status" || { ok=0; why="$why; $(grep Uid: "$broker/status")"; }
fi
kill "$bg" 2>/dev/null
wait "$bg"
grep -q "seccomp: the broker" "$work/err" && { ok=0; why="$why; the broker made a forbidden call"; }
done_point

# shellcheck disable=SC2086
point "SOCKS5 on the proxy's port: an allowed name is reached, another refused by the rules" 0 \
	$allow -- sh -c 'curl -sS -m 30 --socks5-hostname 127.0.0.1:3128 http://files.test:8080/socks;
		curl -sS -m 30 --socks5-hostname 127.0.0.1:3128 http://other.test:8080/x 2>/dev/null ||
		echo "refused: curl $?"'
want "netserve /socks"
want_in "refused: curl"
want_err "net: refused SOCKS5 other.test port 8080"
done_point

# pip and git trust the test CA the way a user points them at a private one.
pipgit='--put '"$ca"' --env PIP_CERT=/root/ca.pem --env GIT_SSL_CAINFO=/root/ca.pem'
pip_cmd='pip install --disable-pip-version-check --retries 0 --timeout 60 --no-deps --target /tmp/site --index-url https://files.test/srv/simple/ mayfly-hello'
git_cmd='git clone -q https://files.test/srv/repo.git /tmp/repo'

# shellcheck disable=SC2086
point "pip installs from an HTTPS index and git clones over HTTPS, through the proxy" 0 \
	$allow $pipgit -- sh -c "$pip_cmd -q 2>&1 | grep -v \"as the 'root' user\";
		PYTHONPATH=/tmp/site python3 -c 'import mayfly_hello; print(\"pip\", mayfly_hello.answer())';
		$git_cmd && cat /tmp/repo/README"
want "pip 42"
want "cloned through mayfly's proxy"
done_point

# The same two with port 443 not allowed: each fails, naming the refusal (pip
# logs a connection error only at -vv: by default it says "No matching
# distribution"; the host-side log line names the refusal).
# shellcheck disable=SC2086
point "pip and git to a port not allowed fail with the proxy's 403" 0 \
	--allow-net files.test:8080 --allow-net 127.0.0.1 --resolve files.test:127.0.0.1 $pipgit \
	-- sh -c "$pip_cmd -vv >/tmp/pip.out 2>&1; echo \"pip=\$?\"; grep -o '403 Forbidden' /tmp/pip.out | head -n 1;
		$git_cmd 2>&1; echo \"git=\$?\""
want "pip=1"
want "403 Forbidden"
want_in "CONNECT tunnel failed, response 403"
want "git=128"
want_err "files.test port 443 is not allowed by any --allow-net rule"
done_point

# boot --allow-net --audit (what serve runs for a sandbox with rules when its
# own log is on): each connection attempt of the VM is a line in the log's one
# hash chain, allowed and refused alike, with the VM's id.
n=$((n + 1))
name="boot --allow-net --audit: each connection attempt is an audit line; the chain verifies"
ok=1
why=""
log=$work/net-audit.jsonl
sock=$work/boot.sock
rm -f "$log"
# shellcheck disable=SC2086
"$mayfly" boot --snapshot "$snap" $allow --audit "$log" --id netaudit --vsock "$sock" \
	</dev/null >"$work/boot.out" 2>"$work/boot.err" &
bg=$!
i=0
while [ ! -S "$sock" ] && [ "$i" -lt 300 ] && kill -0 "$bg" 2>/dev/null; do
	sleep 0.2
	i=$((i + 1))
done
timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$sock" -- sh -c \
	'curl -sS -m 30 http://files.test:8080/audited; curl -sS -m 30 http://other.test:8080/x >/dev/null 2>&1; echo "curl=$?"' \
	>"$work/out" 2>"$work/err" || { ok=0; why="exec failed"; }
kill -TERM "$bg" 2>/dev/null
wait "$bg"
want "netserve /audited"
grep -q '"sandbox":"netaudit".*"host":"files.test".*"outcome":"allowed"' "$log" 2>/dev/null ||
	{ ok=0; why="$why; no allowed files.test record"; }
grep -q '"host":"other.test".*"outcome":"refused"' "$log" 2>/dev/null ||
	{ ok=0; why="$why; no refused other.test record"; }
"$mayfly" audit verify "$log" >/dev/null 2>"$work/verify.err" ||
	{ ok=0; why="$why; audit verify: $(cat "$work/verify.err")"; }
[ -n "$why" ] && tail -n 5 "$work/boot.err" >>"$work/err"
done_point

[ "$failed" = 0 ] || exit 1
exit 0
