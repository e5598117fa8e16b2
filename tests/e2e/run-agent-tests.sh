#!/bin/sh
# shellcheck disable=SC2016  # guest commands are single-quoted on purpose
# run-agent-tests.sh - the Debian agent image (rootfs/build-agent) end to end: what an AI
# agent's first tool calls need works in `mayfly run` with it. TAP on stdout.
#
# usage: run-agent-tests MAYFLY GUESTDIR FILESDIR
#   MAYFLY    the mayfly binary
#   GUESTDIR  the default guest (vmlinux at least; arm64: Image)
#   FILESDIR  files put into the VMs: a wheel (mayfly_hello-1.0-py3-none-any.whl),
#             test_pass.py, test_fail.py, hello.c, data.json, notes.txt
#   $MAYFLY_TEST_DATA/agent.ext4  the agent image (tests/run-in-kvm --data: in the
#             nested harness a read-only disk, not L1's RAM)
#
# The runs go through `mayfly run`'s default root, which is the agent image once a
# guest directory has agent.ext4: a guest directory of links is made here for that.
# Needs a /dev/kvm that runs Linux guests (tests/run-in-kvm --linux decides).
# Environment: E2E_CASE_TIMEOUT seconds for one mayfly run (default 300: pip and gcc
# under the nested harness's emulation take a while).
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run ("Bail out!").
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
[ $# -eq 3 ] || usage "run-agent-tests MAYFLY GUESTDIR FILESDIR"
mayfly=$1
guestdir=$2
files=$3
case_timeout=${E2E_CASE_TIMEOUT:-300}

need_mayfly
need_agent_image
need_kvm

tap_workdir agent-tests
agent_guest

rc=0
# vm ARGS...: `mayfly run ARGS`; rc, $work/out (CRs dropped) and $work/err.
vm() {
	s=$(cut -d' ' -f1 /proc/uptime)
	timeout -k 5 "$case_timeout" "$mayfly" run "$@" </dev/null >"$work/raw" 2>"$work/err"
	rc=$?
	tr -d '\r' <"$work/raw" >"$work/out"
	e=$(cut -d' ' -f1 /proc/uptime)
	echo "# timing: $(echo "$s $e" | awk '{ printf "%.1f", $2 - $1 }') s: mayfly run $*"
}
# point NAME WANT_RC WANT_OUT ARGS...: one TAP point: `mayfly run ARGS` exits WANT_RC
# and its stdout has the line WANT_OUT (empty: anything).
point() {
	name=$1 want_rc=$2 want_out=$3
	shift 3
	args=$*
	vm "$@"
	[ "$rc" = "$want_rc" ] && { [ -z "$want_out" ] || grep -qxF "$want_out" "$work/out"; } ||
		fail "exit $rc (wanted $want_rc), wanted a line '$want_out'"
	tap "$name"
}
# A failed point: the run, why, and the ends of its stdout and stderr.
tap_why=diag
tap_diag() {
	echo "#   mayfly run $args"
	echo "#   $why; stdout, stderr:"
	tap_tail 20 "#   > " "$work/out"
	tap_tail 20 "#   ! " "$work/err"
}

echo "1..11"
point "the default root is the agent image (Debian 12)" 0 "bookworm" \
	-- sh -c '. /etc/os-release; echo "$VERSION_CODENAME"'
point "python3 imports sys, json, sqlite3, venv" 0 "imports ok" \
	-- python3 -c 'import sys, json, sqlite3, venv; sqlite3.connect(":memory:"); print("imports ok")'
point "python3 -m venv, pip install of a wheel put in from the host (no network)" 0 "hello 42" \
	--put "$files/mayfly_hello-1.0-py3-none-any.whl:/root/mayfly_hello-1.0-py3-none-any.whl" \
	-- sh -c 'python3 -m venv /root/venv && /root/venv/bin/pip install -q --no-index \
		/root/mayfly_hello-1.0-py3-none-any.whl && /root/venv/bin/python -c \
		"import mayfly_hello; print(\"hello\", mayfly_hello.answer())"'
point "pytest: a passing test file exits 0" 0 "" \
	--put "$files/test_pass.py:/root/test_pass.py" -- python3 -m pytest -q -p no:cacheprovider /root/test_pass.py
point "pytest: a failing test file exits 1" 1 "" \
	--put "$files/test_fail.py:/root/test_fail.py" -- python3 -m pytest -q -p no:cacheprovider /root/test_fail.py
point "git init, commit, log" 0 "first commit" \
	--put "$files/notes.txt:/root/notes.txt" -- sh -c 'mkdir /root/repo && cd /root/repo &&
		git init -q && cp /root/notes.txt . && git add notes.txt &&
		git -c user.name=m -c user.email=m@example.org commit -q -m "first commit" &&
		git log --format=%s'
point "node -e" 0 "42" -- node -e 'console.log(6 * 7)'
point "gcc: a hello world compiles and runs" 0 "hello from gcc" \
	--put "$files/hello.c:/root/hello.c" -- sh -c 'gcc -O2 -o /root/hello /root/hello.c && /root/hello'
point "jq on a file put into the VM" 0 "42" \
	--put "$files/data.json:/root/data.json" -- jq .answer /root/data.json
point "rg on a file put into the VM" 0 "2:the needle is here" \
	--put "$files/notes.txt:/root/notes.txt" -- rg -n needle /root/notes.txt
# rootfs/oci-import's image of two busybox layers (e2e-suite makes it): it boots with
# mayfly's init and agent, and the second layer's whiteout and opaque dir hold.
# Its config's Env, WorkingDir and User are the agent's defaults (--defaults).
point "an image imported from an OCI layout boots and runs a command as its config says" 0 \
	"new in layer 2: hello oci: /data: 1000" \
	--rootfs "$MAYFLY_TEST_DATA/oci.ext4" -- sh -c '[ ! -e /data/a ] && [ ! -e /opq/old ] &&
		[ -e /data/b ] && echo "$(cat /opq/new): $GREETING: $PWD: $(id -u)"'
tap_exit
