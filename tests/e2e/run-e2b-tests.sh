#!/bin/sh
# run-e2b-tests.sh - mayfly serve --e2b end to end with the official E2B JS SDK
# (tests/e2e/e2b-client: `e2b` from the npm registry, unmodified, driven
# through its public API only) in sandboxes of the Debian agent image (the
# SDK runs commands with /bin/bash): each of the SDK script's cases a point,
# then what the service must show for them (the calls in its audit log under
# the key's name, nothing left after the drain). Prints TAP.
#
# usage: run-e2b-tests MAYFLY GUESTDIR E2BCLIENT
#   GUESTDIR   the default guest's kernel (vmlinux)
#   E2BCLIENT  the directory tests/e2e/e2b-client/prepare made: node,
#              sdk-tests.mjs, node_modules
#   $MAYFLY_TEST_DATA/agent.ext4  the agent image (tests/run-in-kvm --data)
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cat ls
[ $# -eq 3 ] || usage "run-e2b-tests MAYFLY GUESTDIR E2BCLIENT"
mayfly=$1
guestdir=$2
client=$3
case $client in /*) ;; *) client=$(pwd)/$client ;; esac

need_mayfly
need_agent_image
[ -x "$client/node" ] && [ -r "$client/sdk-tests.mjs" ] && [ -d "$client/node_modules" ] ||
	bail "$client lacks node, sdk-tests.mjs or node_modules"
need_kvm e2e-suite
tap_workdir e2b-tests
agent_guest
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null || bail "cannot bring lo up here"

key=e2b-key-0123456789abcdef0123
port=49987
printf '# the SDK\nsdk %s\n' "$key" >"$work/tokens"
chmod 600 "$work/tokens"
spid=""
tap_cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
}
tap_diag() {
	tap_tail 5 "# service: " "$work/serve.err"
}

# serve_start STATE ADDR [OPTION...]: mayfly serve --e2b ADDR, waited for.
serve_start() {
	st_dir=$1 addr=$2
	shift 2
	# Emptied here, not only by the child's redirect: that one may come
	# after the first grep below, which then read the previous service's
	# "API on" line and gave up at once ("still running", nothing logged).
	: >"$work/serve.err"
	"$mayfly" serve --state "$st_dir" --tokens "$work/tokens" --e2b "$addr" --ephemeral "$@" \
		>>"$work/serve.err" 2>&1 &
	spid=$!
	i=0
	while ! grep -q "E2B's API on $addr" "$work/serve.err" && kill -0 "$spid" 2>/dev/null &&
		[ $i -lt 1200 ]; do
		sleep 0.5
		i=$((i + 1))
	done
	grep -q "E2B's API on $addr" "$work/serve.err" && return 0
	# Gone without a word (a SIGKILL, say): its status says how.
	how="still running"
	if ! kill -0 "$spid" 2>/dev/null; then
		wait "$spid"
		how="exit status $?"
	fi
	bail "mayfly serve --e2b did not start ($how; $(free -m | awk '/^Mem:/ {print $7}') MiB available): $(tail -n 5 "$work/serve.err")"
}
# sdk URL PREFIX [CASES]: the SDK script against URL (both of its URLs), its
# own TAP, each point as one of ours (PREFIX before each); CASES: a comma
# list of its cases (default all).
sdk() {
	E2B_API_URL="$1" E2B_SANDBOX_URL="$1" E2B_TEST_CASES="${3:-}" \
		E2B_API_KEY="$key" E2B_TEST_BAD_KEY=wrong-key-0123456789abcdef \
		timeout -k 5 1200 "$client/node" "$client/sdk-tests.mjs" >"$work/sdk.tap" 2>"$work/sdk.err"
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) tap "$2: ${line#ok * - }" ;;
		"not ok "*)
			rest=${line#not ok * - }
			fail "${rest#* # }"
			tap "$2: ${rest%% # *}"
			;;
		esac
	done <"$work/sdk.tap"
	grep -q '^1\.\.[1-9]' "$work/sdk.tap" ||
		fail "the SDK script ended without its plan: $(tail -n 3 "$work/sdk.err")"
	[ $rc -le 1 ] || fail "the SDK script exited $rc: $(tail -n 3 "$work/sdk.err")"
	tap "$2: the SDK script ran to its end (exit $rc)"
}
# serve_drain STATE: SIGTERM, then nothing of the --ephemeral service left.
serve_drain() {
	kill -TERM "$spid"
	wait "$spid"
	spid=""
	left=$(ls "$1/sb" 2>/dev/null | wc -l | tr -d ' ')
	[ "$left" -eq 0 ] || fail "$left sandbox directories left after the drain"
	! ls -d /sys/fs/cgroup/mayfly/vm-* >/dev/null 2>&1 ||
		fail "VM cgroups left: $(ls -d /sys/fs/cgroup/mayfly/vm-*)"
}

echo "# starting mayfly serve --e2b (makes the agent image's snapshot once: minutes nested)"
serve_start "$work/state" "127.0.0.1:$port" --audit "$work/audit.log"
sdk "http://127.0.0.1:$port" SDK

# A second client we did not write: curl, on the control plane's REST
# shapes as E2B's OpenAPI file has them, envd's Start stream and a
# published port.
api="http://127.0.0.1:$port"
# rest METHOD PATH [BODY]: the status; the body in $work/rest.body.
rest() {
	"$client/curl" -sS -m 60 -o "$work/rest.body" -w '%{http_code}' -X "$1" -H "X-API-KEY: $key" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} "$api$2" 2>>"$work/curl.err"
}
# has TEXT...: every TEXT is in the last body.
has() {
	for t in "$@"; do
		grep -qF -- "$t" "$work/rest.body" || { fail "no $t in $(head -c 300 "$work/rest.body")"; return 1; }
	done
}
st=$(rest POST /sandboxes '{"templateID":"base","timeout":120,"metadata":{"by":"curl"}}')
[ "$st" = 201 ] || fail "create: $st $(head -c 300 "$work/rest.body")"
id=$(sed -n 's/.*"sandboxID":"\([A-Za-z0-9_-]*\)".*/\1/p' "$work/rest.body")
traffic=$(sed -n 's/.*"trafficAccessToken":"\([0-9a-f]*\)".*/\1/p' "$work/rest.body")
has '"templateID":"base"' "\"envdAccessToken\":\"$key\"" '"domain":"localhost"' '"envdVersion":"' '"clientID":"'
[ ${#traffic} -eq 32 ] || fail "create: no 32-digit trafficAccessToken"
tap "curl: POST /sandboxes is 201 with sandboxID, templateID, envdAccessToken, trafficAccessToken, domain"
st=$(rest GET "/v2/sandboxes?metadata=by%3Dcurl")
[ "$st" = 200 ] || fail "list: $st"
has "\"sandboxID\":\"$id\"" '"state":"running"' '"metadata":{"by":"curl"}' '"startedAt":"' '"endAt":"'
case $(head -c 1 "$work/rest.body") in "[") ;; *) fail "list: not an array" ;; esac
st=$(rest GET "/sandboxes/$id")
[ "$st" = 200 ] || fail "get: $st"
has "\"sandboxID\":\"$id\"" '"state":"running"' "\"trafficAccessToken\":\"$traffic\"" '"cpuCount":' '"memoryMB":'
st=$(rest POST "/sandboxes/$id/timeout" '{"timeout":90}')
[ "$st" = 204 ] || fail "timeout: $st"
st=$(rest GET "/sandboxes/$id/metrics")
[ "$st" = 200 ] || fail "metrics: $st"
has '[{"timestamp":"' '"timestampUnix":' '"cpuCount":' '"cpuUsedPct":' '"memUsed":' '"memTotal":' '"memCache":' '"diskUsed":' '"diskTotal":'
tap "curl: list by metadata, get, set timeout and metrics answer E2B's shapes"

# envd's Start as a Connect stream (a 5-byte envelope: flags, big-endian
# length) serving a directory on port 8001; the command lives with the stream.
msg='{"process":{"cmd":"/bin/sh","args":["-c","mkdir -p /tmp/c && echo curl-port > /tmp/c/i.html && cd /tmp/c && if command -v python3 >/dev/null; then exec python3 -m http.server 8001; else exec busybox httpd -f -p 8001; fi"]}}'
len=${#msg}
printf "\\000\\000\\000\\$(printf %o $((len / 256)))\\$(printf %o $((len % 256)))%s" "$msg" >"$work/start.bin"
"$client/curl" -sS -N -m 120 -X POST -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $key" \
	-H 'Content-Type: application/connect+json' --data-binary @"$work/start.bin" \
	"$api/process.Process/Start" >"$work/start.out" 2>>"$work/curl.err" &
cpid=$!
i=0 got=""
while [ $i -lt 60 ] && [ "$got" != curl-port ]; do
	sleep 0.5
	got=$("$client/curl" -sS -m 10 -H "Host: 8001-$id.localhost" \
		-H "e2b-traffic-access-token: $traffic" "$api/i.html" 2>>"$work/curl.err")
	i=$((i + 1))
done
[ "$got" = curl-port ] || fail "the published port 8001 never answered: $(tail -n 2 "$work/curl.err")"
grep -q '"start":{"pid":' "$work/start.out" || fail "Start's stream had no start event: $(head -c 200 "$work/start.out")"
st=$("$client/curl" -sS -m 10 -o /dev/null -w '%{http_code}' -H "Host: 8001-$id.localhost" "$api/i.html")
[ "$st" = 401 ] || fail "a published port without a token: $st, not 401"
st=$("$client/curl" -sS -m 10 -o /dev/null -w '%{http_code}' -H "Host: 8002-$id.localhost" \
	-H "e2b-traffic-access-token: $traffic" "$api/")
[ "$st" = 502 ] || fail "a closed published port: $st, not 502"
kill "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
tap "curl: envd's Start stream runs a server whose published port answers its token (401 without, 502 closed)"

# Connect's binary codec, as a client generated from envd's .proto files
# (connect-go's default) speaks it: the messages written here byte by byte
# with E2B's field numbers. StartRequest{process{cmd, args}}, enveloped:
printf '\000\000\000\000\030\012\026\012\011/bin/echo\022\011binary-ok' >"$work/start.pb"
"$client/curl" -sS -m 60 -X POST -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $key" \
	-H 'Content-Type: application/connect+proto' -D "$work/pb.head" -o "$work/start.pbout" \
	--data-binary @"$work/start.pb" "$api/process.Process/Start" 2>>"$work/curl.err" ||
	fail "a binary Start: $(tail -n 1 "$work/curl.err")"
grep -qi '^content-type: application/connect+proto' "$work/pb.head" ||
	fail "a binary Start's reply: $(head -n 5 "$work/pb.head")"
hex=$(od -An -tx1 -v "$work/start.pbout" | tr -d ' \n')
# StartResponse{event{data{stdout: "binary-ok\n"}}}, and the JSON {} that
# ends a stream in either codec.
case $hex in
*0a0e120c0a0a62696e6172792d6f6b0a*7b7d) ;;
*) fail "a binary Start's stream: $hex" ;;
esac
grep -aq 'exit status 0' "$work/start.pbout" || fail "a binary Start's end event: $hex"
# StatRequest{path: "/tmp"}, unary: EntryInfo{name: "tmp", type: DIRECTORY}.
printf '\012\004/tmp' >"$work/stat.pb"
st=$("$client/curl" -sS -m 30 -o "$work/stat.pbout" -D "$work/pb.head" -w '%{http_code}' \
	-X POST -H "E2b-Sandbox-Id: $id" -H "X-Access-Token: $key" \
	-H 'Content-Type: application/proto' --data-binary @"$work/stat.pb" \
	"$api/filesystem.Filesystem/Stat" 2>>"$work/curl.err")
[ "$st" = 200 ] || fail "a binary Stat: $st $(head -c 200 "$work/stat.pbout")"
grep -qi '^content-type: application/proto' "$work/pb.head" || fail "a binary Stat's type"
hex=$(od -An -tx1 -v "$work/stat.pbout" | tr -d ' \n')
case $hex in
0a*0a03746d701002*) ;;
*) fail "a binary Stat's reply: $hex" ;;
esac
tap "curl: envd in Connect's binary codec (application/connect+proto and application/proto)"

st=$("$client/curl" -sS -m 30 -o "$work/rest.body" -w '%{http_code}' -H "X-API-KEY: wrong" "$api/sandboxes")
[ "$st" = 401 ] || fail "a wrong key: $st"
has '"code":401' '"message":"'
i=0
while [ "$(rest DELETE "/sandboxes/$id")" != 204 ] && [ $i -lt 20 ]; do sleep 0.5; i=$((i + 1)); done
[ $i -lt 20 ] || fail "delete: never 204"
st=$(rest GET "/sandboxes/$id")
[ "$st" = 404 ] || fail "get after delete: $st"
has '"code":404'
tap "curl: a wrong key is 401, delete is 204, then get is 404, each with {code, message}"

# Its calls went through the service's gate: in the audit log, by the
# key's name.
grep -q '"caller":"sdk"' "$work/audit.log" || fail "no call of the key 'sdk' in the audit log"
grep -q '"tool":"exec"' "$work/audit.log" || fail "no exec in the audit log"
grep -q '"tool":"write_file"' "$work/audit.log" || fail "no write_file in the audit log"
grep -q '"tool":"port","port":8000' "$work/audit.log" || fail "no published port's connection in the audit log"
"$mayfly" audit verify "$work/audit.log" >"$work/verify.out" 2>&1 || fail "audit verify: $(tail -n 2 "$work/verify.out")"
tap "the SDK's commands, files and port connections are in the audit log, the chain verified"

serve_drain "$work/state"
tap "the --ephemeral service drains: no sandbox, VM or cgroup left"

# TLS: the service again over HTTPS (--e2b-cert/--e2b-key, tests/data's
# self-signed pair for localhost and 127.0.0.1), the SDK trusting it, curl
# checking it; plain HTTP on that port is not answered.
tport=49988
serve_start "$work/state-tls" "127.0.0.1:$tport" --e2b-cert "$client/tls-cert.pem" \
	--e2b-key "$client/tls-key.pem"
NODE_EXTRA_CA_CERTS="$client/tls-cert.pem" sdk "https://127.0.0.1:$tport" "SDK over TLS" \
	create,run,files,kill
st=$("$client/curl" -sS -m 30 --cacert "$client/tls-cert.pem" -o "$work/rest.body" \
	-w '%{http_code} %{http_version}' -H "X-API-KEY: $key" "https://127.0.0.1:$tport/v2/sandboxes" \
	2>>"$work/curl.err")
[ "$st" = "200 1.1" ] || fail "curl over TLS: '$st' (want 200 over HTTP/1.1): $(tail -n 1 "$work/curl.err")"
st=$("$client/curl" -sS -m 10 -o /dev/null -w '%{http_code}' -H "X-API-KEY: $key" \
	"http://127.0.0.1:$tport/v2/sandboxes" 2>/dev/null)
[ "$st" = 000 ] || fail "plain HTTP on the TLS port was answered: $st"
serve_drain "$work/state-tls"
tap "TLS: curl verifies the certificate and gets HTTP/1.1; plain HTTP there gets no answer; the drain leaves nothing"

tap_end
