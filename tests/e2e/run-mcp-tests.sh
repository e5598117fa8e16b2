#!/bin/sh
# shellcheck disable=SC2016 # guest commands and JSON are single-quoted on purpose
# run-mcp-tests.sh - the audit log, the approval hook and `mayfly mcp` end to end in
# the default Linux guest: run --audit and audit verify (and tampering), run
# --approve refusals and timeouts, a scripted MCP client, and the official MCP
# TypeScript SDK clients (tests/e2e/mcp-client): v1 (MCP 2025, initialize) and
# v2 (MCP 2026-07-28, per-request _meta). Prints TAP.
#
# usage: run-mcp-tests MAYFLY GUESTDIR MCPCLIENT
#   MCPCLIENT  the directory tests/e2e/mcp-client/prepare made: node, client.mjs,
#              client2.mjs, checks.mjs, node_modules
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cp cat date
[ $# -eq 3 ] || usage "run-mcp-tests MAYFLY GUESTDIR MCPCLIENT"
mayfly=$1
guestdir=$2
client=$3
case_timeout=${E2E_CASE_TIMEOUT:-120}

need_mayfly
need_guest "$guestdir" vmlinux rootfs.ext4
[ -x "$client/node" ] && [ -r "$client/client.mjs" ] && [ -r "$client/client2.mjs" ] &&
	[ -r "$client/checks.mjs" ] ||
	bail "$client lacks node, client.mjs, client2.mjs or checks.mjs"
need_kvm e2e-suite
export MAYFLY_GUEST_DIR="$guestdir"
case $mayfly in /*) ;; *) mayfly=$(pwd)/$mayfly ;; esac

tap_workdir mcp-tests
export MAYFLY_CACHE="$work/cache"

# A failed point: the last lines of the last run's stderr.
tap_diag() {
	tap_tail 8 "# stderr: " "$work/err"
}

# mf ARGS...: mayfly ARGS with stdin from /dev/null (or $work/in when MF_IN=1),
# stdout in $work/out, stderr in $work/err, status in $rc; $secs its wall time.
mf() {
	in=/dev/null
	[ "${MF_IN:-0}" = 1 ] && in=$work/in
	t0=$(date +%s)
	timeout -k 5 "$case_timeout" "$mayfly" "$@" <"$in" >"$work/out" 2>"$work/err"
	rc=$?
	secs=$(($(date +%s) - t0))
}

# ---- mayfly run --audit, mayfly audit verify ---------------------------------

log=$work/run.log
echo "a host file" >"$work/h.txt"
mf run --audit "$log" -- echo hi
want_rc 0
has "$work/out" hi
mf run --audit "$log" --env TOKEN=s3cret --put "$work/h.txt":/tmp/h -- cat /tmp/h
want_rc 0
has "$log" '"argv":["echo","hi"]'
has "$log" '"stdout":{"bytes":3,"sha256":"98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"}'
has "$log" '"env_keys":["TOKEN"]'
has "$log" '"tool":"write_file"'
grep -q s3cret "$log" && fail "an environment value reached the audit log"
tap "run --audit records each call (argv, env keys only, output digests, files)"

mf audit verify "$log"
want_rc 0
has "$work/out" "audit: 3 records intact, head "
tap "audit verify passes on a real log"

head=$(sed -n 's/.*head \([0-9a-f]*\).*/\1/p' "$work/out")
sed 's/"echo","hi"/"echo","HI"/' "$log" >"$work/edited.log"
mf audit verify "$work/edited.log"
want_rc 1
has "$work/err" "line 1: its content does not match its line_sha256 (edited)"
sed 1d "$log" >"$work/removed.log"
mf audit verify "$work/removed.log"
want_rc 1
has "$work/err" "line 1: seq is 2, want 1"
head -n 2 "$log" >"$work/cut.log"
mf audit verify --head "$head" "$work/cut.log"
want_rc 1
has "$work/err" "line 3: no line has the head"
tap "audit verify names an edited, a removed and a cut-off line (exit 1)"

# ---- mayfly run --approve -----------------------------------------------------

mf run --audit "$log" --approve 'echo "not today"; exit 1' -- touch /tmp/x
want_rc 123
[ -s "$work/out" ] && fail "the refused command ran: $(head -c 100 "$work/out")"
has "$work/err" "refused by the approver (exec): the approver exited 1: not today"
# Jailed as any run (the approver runs in its spawner, outside): one line.
lines=$(wc -l <"$work/err")
[ "$lines" -eq 1 ] || fail "$lines stderr lines, want 1"
tail -n 1 "$log" | grep -q '"outcome":"refused"' || fail "the refusal is not audited"
tap "run --approve: a refusal exits 123 with one line, the command never runs, and is audited"

mf run --approve '! grep -q "\"write_file\""' --put "$work/h.txt":/tmp/h -- echo ran
want_rc 123
has "$work/err" "refused by the approver (write_file)"
mf run --approve 'grep -q "\"argv\":\[\"echo\",\"ok\"\]"' -- echo ok
want_rc 0
has "$work/out" ok
tap "run --approve sees the call as JSON: a file write refused, an exec allowed"

mf run --approve 'sleep 60' --approve-timeout 2 -- echo never
want_rc 123
has "$work/err" "did not answer within 2 s"
[ "$secs" -lt 60 ] || fail "took $secs s"
tap "run --approve-timeout: a slow approver is killed and counts as a refusal"

mf audit verify "$log"
want_rc 0
tap "the log still verifies after refusals were appended"

# ---- mayfly mcp: a scripted client -------------------------------------------

cat >"$work/in" <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"scripted","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo scripted; uname -s"}}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/s.txt","content":"kept\n"}}}
{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/s.txt"}}}
{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_command","arguments":{"command":["rm","/tmp/s.txt"]}}}
{"jsonrpc":"2.0","id":7,"method":"ping"}
{broken
{"jsonrpc":"2.0","id":8,"method":"no/such/method"}
JSON
mlog=$work/mcp.log
MF_IN=1 mf mcp --audit "$mlog" --approve '! grep -q "\"rm\""'
want_rc 0
echo "# timing: the scripted session (a VM restored, 8 requests) took $secs s"
has "$work/out" '"id":1,"result":{"protocolVersion":"2025-06-18"'
has "$work/out" '"name":"run_command"'
has "$work/out" '"stdout":"scripted\nLinux\n"'
has "$work/out" '"content":"kept\n"'
has "$work/out" 'refused by the approver (exec)'
has "$work/out" '"id":7,"result":{}'
has "$work/out" '"id":null,"error":{"code":-32700'
has "$work/out" '"id":8,"error":{"code":-32601'
[ "$(wc -l <"$work/out")" -eq 9 ] || fail "$(wc -l <"$work/out") answers, want 9"
tap "mcp: a scripted client's session (lifecycle, tools, refusal, ping, errors)"

mf audit verify "$mlog"
want_rc 0
has "$work/out" "audit: 4 records intact"
has "$mlog" '"caller":"mcp:scripted"'
tap "mcp --audit: each tool call recorded, the chain intact"

# ---- mayfly mcp: the official MCP TypeScript SDK client -----------------------

# sdk_client SCRIPT LABEL LASTPOINT: one of the SDK clients against mayfly mcp,
# its PASS/FAIL lines as TAP points named LABEL: ..., audited in $work/LABEL.log.
sdk_client() {
	t0=$(date +%s)
	timeout -k 5 $((case_timeout * 3)) "$client/node" "$client/$1" "$mayfly" \
		--audit "$work/$2.log" --approve '! grep -q refuse-me' >"$work/$2" 2>"$work/err"
	rc=$?
	echo "# timing: the $2 client's sessions took $(($(date +%s) - t0)) s"
	while IFS= read -r line; do
		case $line in
		PASS\ *) tap "$2: ${line#PASS }" ;;
		FAIL\ *) why=${line#* # }; tap "$2: ${line#FAIL }" ;;
		esac
	done <"$work/$2"
	grep -q "^PASS $3" "$work/$2" || fail "the $2 client stopped early (exit $rc)"
	want_rc 0
	tap "$2: the client's sessions ended cleanly"
}

sdk_client client.mjs sdk "the same sandbox"

# ---- mayfly mcp: the official SDK v2 client, MCP 2026-07-28 --------------------

sdk_client client2.mjs sdk2 "auto: a command runs"
has "$work/sdk2.log" '"caller":"mcp:sdk2-e2e"'
mf audit verify "$work/sdk2.log"
want_rc 0
tap "sdk2: the 2026-07-28 calls are audited under the client's name (from _meta), the chain intact"

tap_end
