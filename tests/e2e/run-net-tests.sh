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

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
[ $# -eq 3 ] || usage "run-net-tests MAYFLY GUESTDIR FILESDIR"
mayfly=$1
guestdir=$2
files=$3
case_timeout=${E2E_CASE_TIMEOUT:-300}
attempts=${NET_E2E_ATTEMPTS:-2000}

need_mayfly
need_agent_image
need_kvm
[ "$(id -u)" = 0 ] || bail "the HTTPS server listens on port 443: run as root (the harness's L1 is)"

tap_workdir net-tests
pids=""
tap_cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
}
agent_guest

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
# each `want LINE` / `want_err TEXT` after it checks stdout / stderr, and
# tap "$name" reports the point.
point() {
	name=$1 want_rc=$2
	shift 2
	vm "$@"
	[ "$rc" = "$want_rc" ] || why="exit $rc, wanted $want_rc"
}
# fail REASON: one more reason the point fails, after "; " (the first one too).
fail() {
	why="$why; $*"
}
want() {
	grep -qxF -- "$1" "$work/out" || fail "no stdout line '$1'"
}
want_in() {
	grep -qF -- "$1" "$work/out" || fail "stdout lacks '$1'"
}
want_err() {
	grep -qF -- "$1" "$work/err" || fail "stderr lacks '$1'"
}
# A failed point: the ends of the last run's stdout and stderr.
tap_diag() {
	tap_tail 20 "#   > " "$work/out"
	tap_tail 20 "#   ! " "$work/err"
}

allow="--allow-net files.test:443 --allow-net files.test:8080 --allow-net 127.0.0.1 --resolve files.test:127.0.0.1"
ca="$files/ca.pem:/root/ca.pem"

echo "1..18"

# shellcheck disable=SC2086  # $allow is several words on purpose
point "no --allow-net: only lo, no proxy, nothing reachable" 0 \
	-- sh -c 'ls /sys/class/net; echo "proxy=[$HTTP_PROXY]"; curl -sS -m 5 http://127.0.0.1:8080/x 2>/dev/null; echo "curl=$?"'
want "lo"
want "proxy=[]"
want "curl=7"
[ "$(grep -c . "$work/out")" = 3 ] || fail "an interface besides lo"
tap "$name"

# shellcheck disable=SC2086
point "an allowed name and port over HTTPS and plain HTTP, curl through the proxy" 0 $allow \
	--put "$ca" -- sh -c 'echo "$HTTPS_PROXY"; curl -sS -m 30 --cacert /root/ca.pem https://files.test/hello &&
		curl -sS -m 30 http://files.test:8080/plain'
want "http://127.0.0.1:3128"
want "netserve /hello"
want "netserve /plain"
tap "$name"

# The minimal root's busybox wget (a user's first network command there; an
# outside review saw it die with SIGSEGV): through the proxy it gets the page,
# with no network it says why and exits 1.
# shellcheck disable=SC2086
point "the minimal root's busybox wget through the proxy gets the allowed page" 0 $allow \
	--rootfs "$guestdir/rootfs.ext4" -- wget -q -O- http://files.test:8080/plain
want "netserve /plain"
tap "$name"

point "the minimal root's busybox wget with no network: one message, exit 1, no crash" 1 \
	--rootfs "$guestdir/rootfs.ext4" -- wget -O- http://files.test:8080/plain
want_err "wget: bad address 'files.test:8080'"
tap "$name"

# shellcheck disable=SC2086
point "a name or port not allowed is refused with the reason" 0 $allow \
	-- sh -c 'curl -sS -m 30 http://other.test:8080/x; curl -sS -m 30 http://files.test:8081/x;
		curl -sS -m 30 -o /dev/null https://other.test/ 2>&1; echo done'
want_in "mayfly: other.test port 8080 is not allowed by any --allow-net rule"
want_in "mayfly: files.test port 8081 is not allowed by any --allow-net rule"
want_in "403"
want_err "net: refused"
tap "$name"

point "a name resolving to 127.0.0.1 is refused unless a rule names 127.0.0.1" 0 \
	--allow-net files.test:8080 --resolve files.test:127.0.0.1 \
	-- sh -c 'curl -sS -m 30 http://files.test:8080/x'
want_in "mayfly: files.test resolves to 127.0.0.1 (loopback), which no --allow-net rule names"
tap "$name"

# shellcheck disable=SC2086
point "a TLS server name other than the CONNECT host is refused" 0 $allow --put "$ca" \
	-- sh -c 'openssl s_client -proxy 127.0.0.1:3128 -connect files.test:443 -servername evil.test \
		-CAfile /root/ca.pem </dev/null >/dev/null 2>&1; echo "s_client=$?";
		openssl s_client -proxy 127.0.0.1:3128 -connect files.test:443 -servername files.test \
		-CAfile /root/ca.pem </dev/null 2>/dev/null | grep -q "Verify return code: 0 (ok)" && echo verified'
want "s_client=1"
want "verified"
want_err "TLS server name evil.test differs from the CONNECT host"
tap "$name"

# shellcheck disable=SC2086
point "hostile: $attempts attempts, a 1 MiB CONNECT line, a client that never reads; the host holds" 0 \
	$allow --put "$files/hostile.py:/root/hostile.py" --put "$ca" --env "ATTEMPTS=$attempts" \
	-- sh -c 'python3 /root/hostile.py && curl -sS -m 30 --cacert /root/ca.pem https://files.test/after'
want "refused $attempts"
want "long line: 431"
want "stalled reader: host alive"
want "netserve /after"
lines=$(wc -l <"$work/err")
[ "$lines" -lt 200 ] || fail "$lines stderr lines: the log is not rate-limited"
tap "$name"

# shellcheck disable=SC2086
point "python (pip's urllib) and git take the proxy from the environment" 0 $allow \
	-- sh -c 'python3 -c "import urllib.request as u; print(u.urlopen(\"http://files.test:8080/py\").read().decode().strip())";
		git ls-remote http://other.test:8080/repo.git 2>&1 | grep -o "403" | head -n 1'
want "netserve /py"
want "403"
tap "$name"

# ---- beyond run: snapshot create, a restore, mcp -------------------------------
# Rules are each run's own, never saved: snapshot create's serve its --setup
# commands, and a restore has the network only with its own --allow-net.
snap=$work/snap
verb="snapshot create"
# shellcheck disable=SC2086
point "snapshot create --allow-net: a --setup command reaches the allowed server" 0 $allow \
	--setup 'curl -sS -m 30 http://files.test:8080/setup | tee /root/setup.txt' --out "$snap"
want_err "netserve /setup"
[ -f "$snap/state" ] || fail "no snapshot in $snap"
tap "$name"

verb=run
# shellcheck disable=SC2086
point "a restored run with --allow-net reaches the allowed server" 0 --snapshot "$snap" $allow \
	-- sh -c 'cat /root/setup.txt; curl -sS -m 30 http://files.test:8080/restored'
want "netserve /setup"
want "netserve /restored"
tap "$name"

point "a restored run without --allow-net reaches nothing, its snapshot's rules notwithstanding" 0 \
	--snapshot "$snap" -- sh -c 'echo "proxy=[$HTTP_PROXY]"; curl -sS -m 5 -x http://127.0.0.1:3128 \
		http://files.test:8080/x 2>/dev/null; echo "curl=$?"; curl -sS -m 5 http://127.0.0.1:8080/x \
		2>/dev/null; echo "direct=$?"'
want "proxy=[]"
want "curl=7"
want "direct=7"
tap "$name"

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
tap "$name"
verb=run
vm_in=/dev/null

# The broker (forked before the jail, keeping the host's network) runs under its
# own seccomp filter, as the jail's uid, with no_new_privs.
name="the network broker runs filtered (Seccomp 2), unprivileged, no_new_privs"
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
	why="no mayfly-broker process while the run lived"
else
	grep -q "^Seccomp:[[:space:]]*2$" "$broker/status" || fail "$(grep Seccomp: "$broker/status")"
	grep -q "^NoNewPrivs:[[:space:]]*1$" "$broker/status" || fail "no NoNewPrivs"
	grep -q "^Uid:[[:space:]]*65534[[:space:]]" "$broker/status" || fail "$(grep Uid: "$broker/status")"
fi
kill "$bg" 2>/dev/null
wait "$bg"
grep -q "seccomp: the broker" "$work/err" && fail "the broker made a forbidden call"
tap "$name"

# shellcheck disable=SC2086
point "SOCKS5 on the proxy's port: an allowed name is reached, another refused by the rules" 0 \
	$allow -- sh -c 'curl -sS -m 30 --socks5-hostname 127.0.0.1:3128 http://files.test:8080/socks;
		curl -sS -m 30 --socks5-hostname 127.0.0.1:3128 http://other.test:8080/x 2>/dev/null ||
		echo "refused: curl $?"'
want "netserve /socks"
want_in "refused: curl"
want_err "net: refused SOCKS5 other.test port 8080"
tap "$name"

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
tap "$name"

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
tap "$name"

# boot --allow-net --audit (what serve runs for a sandbox with rules when its
# own log is on): each connection attempt of the VM is a line in the log's one
# hash chain, allowed and refused alike, with the VM's id.
name="boot --allow-net --audit: each connection attempt is an audit line; the chain verifies"
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
	>"$work/out" 2>"$work/err" || why="exec failed"
kill -TERM "$bg" 2>/dev/null
wait "$bg"
want "netserve /audited"
grep -q '"sandbox":"netaudit".*"host":"files.test".*"outcome":"allowed"' "$log" 2>/dev/null ||
	fail "no allowed files.test record"
grep -q '"host":"other.test".*"outcome":"refused"' "$log" 2>/dev/null ||
	fail "no refused other.test record"
"$mayfly" audit verify "$log" >/dev/null 2>"$work/verify.err" ||
	fail "audit verify: $(cat "$work/verify.err")"
[ -n "$why" ] && tail -n 5 "$work/boot.err" >>"$work/err"
tap "$name"

tap_exit
