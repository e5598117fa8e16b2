# shellcheck shell=sh disable=SC2154 # mayfly, guestdir, work, rc, cmd, case_timeout: the runner's
# tap.sh - what the shell test runners share: TAP points, "Bail out!", the
# reasons a point fails, busybox's applets, a few checks and /proc helpers.
# Sourced by tests/e2e/run-*-tests.sh, tests/kvm/run-kvm-tests.sh and
# tests/cli/bad-input.sh from their own directory (tests/kvm/tap.sh and
# tests/cli/tap.sh link here; tests/run-in-kvm copies it beside the runner
# into the nested harness's payload):
#
#   # shellcheck source-path=SCRIPTDIR source=tap.sh
#   . "$(dirname "$0")/tap.sh"
#
# POSIX sh with busybox tools only: the runners also run inside the harness's
# minimal L1. Its own variables start with tap_.
#
# A point: checks give their reasons to fail; tap DESCRIPTION then prints
# "ok N - DESCRIPTION", or "not ok N - DESCRIPTION # REASON" followed by the
# runner's tap_diag; tap_end prints the plan and exits 1 when a point failed,
# else 0 (bail: exit 3; a runner's usage error: exit 2, its own).
#
# Variables: n (points so far), failed (points failed), why (the current
# point's reasons; empty: it passes so far). Settings a runner may change
# after sourcing:
#   tap_reasons=all   why keeps every reason, "; "-separated (default: the
#                     first one given)
#   tap_why=diag      the not-ok line leaves the reason out (tap_diag shows it)
#   tap_stdout=FILE   the last run's stdout for want_line (default $work/out)
#   tap_timeouts=WORDS  want_rc names a timeout(1) kill, and says WORDS for
#                     another status (default: "exit", no timeouts named)
# Functions a runner may define again after sourcing (here they do nothing):
#   tap_before        each point's first step, before its ok or not-ok line
#   tap_diag          after a not-ok line: the point's diagnostics ("# " lines)
#   tap_after         each point's last step, whether it passed or not
#   tap_cleanup       at the runner's exit, before tap_workdir's directory goes

n=0
failed=0
why=""
tap_reasons=first
tap_why=inline
tap_stdout=""
tap_timeouts=""

tap_before() { :; }
tap_diag() { :; }
tap_after() { :; }
tap_cleanup() { :; }

# ---- points on a running VM ---------------------------------------------------

# vsock_vm_points PID SOCK [HOOK]: three points on the VM that `mayfly boot
# --vsock SOCK` runs in the background as PID: two `mayfly exec` calls share
# its state, a file goes in and comes back out with `mayfly cp`, and SIGTERM
# ends it (143) with SOCK removed. HOOK (words), when given, runs after the
# exec calls (a runner's timing line). Leaves vm empty.
vsock_vm_points() {
	tap_vsock=$2
	timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$tap_vsock" -- \
		sh -c 'echo first-call >/root/state' </dev/null >"$work/out" 2>"$work/err"
	tap_rc1=$?
	timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$tap_vsock" -- cat /root/state \
		</dev/null >"$work/out" 2>"$work/err"
	rc=$?
	[ -z "${3:-}" ] || $3
	want_line first-call
	[ "$tap_rc1" -eq 0 ] || fail "the first mayfly exec exited $tap_rc1"
	want_rc 0
	tap "mayfly exec: two calls into one running VM share its state"

	echo "cp-payload $$" >"$work/cp-in.txt"
	timeout -k 5 "$case_timeout" "$mayfly" cp --vsock "$tap_vsock" "$work/cp-in.txt" :/root/cp.txt \
		>"$work/out" 2>"$work/err" &&
		timeout -k 5 "$case_timeout" "$mayfly" cp --vsock "$tap_vsock" :/root/cp.txt \
			"$work/cp-out.txt" >"$work/out" 2>"$work/err"
	rc=$?
	want_rc 0
	cmp -s "$work/cp-in.txt" "$work/cp-out.txt" || fail "mayfly cp round trip changed the file"
	tap "mayfly cp: a file goes into the running VM and comes back"

	kill -TERM "$1" 2>/dev/null
	wait "$1"
	rc=$?
	# shellcheck disable=SC2034  # the runner's: its cleanup kills $vm
	vm=""
	want_rc 143
	[ -e "$tap_vsock" ] && fail "the vsock socket $tap_vsock is left behind"
	tap "the VM behind --vsock stops on SIGTERM and removes its socket"
}

# ---- the runner's start ---------------------------------------------------

# busybox_applets TOOL...: each TOOL missing from PATH becomes a function
# running busybox's applet (a bare busybox may have its applets only inside
# the binary). Nothing without a busybox.
busybox_applets() {
	command -v busybox >/dev/null 2>&1 || return 0
	for tap_tool in "$@"; do
		command -v "$tap_tool" >/dev/null 2>&1 || eval "$tap_tool() { busybox $tap_tool \"\$@\"; }"
	done
}

# usage WORDS...: "usage: WORDS" on stderr, exit 2 (the runner's arguments).
usage() {
	echo "usage: $*" >&2
	exit 2
}

# bail MESSAGE...: the runner cannot go on: "Bail out! MESSAGE", exit 3.
bail() {
	echo "Bail out! $*"
	exit 3
}

# tap_workdir NAME: $work, a new directory (NAME.XXXXXX in $TMPDIR or /tmp),
# removed after the runner's tap_cleanup when the runner exits; INT and TERM
# end it with 130.
tap_workdir() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || bail "mktemp failed"
	trap 'tap_cleanup; rm -rf "$work"' EXIT
	trap 'exit 130' INT TERM
}

# need_mayfly: bail out unless $mayfly (the runner's) can run.
need_mayfly() {
	[ -x "$mayfly" ] || bail "mayfly binary $mayfly is missing or not executable"
}

# need_kvm [SUITE]: bail out without a /dev/kvm, naming the SUITE that runs
# the runner in the nested harness instead.
need_kvm() {
	[ -c /dev/kvm ] || bail "no /dev/kvm here${1:+ ($1 runs these tests in the nested harness instead)}"
}

# need_guest DIR FILE...: bail out unless the guest directory DIR has each
# FILE (tools/build-guest makes them).
need_guest() {
	tap_dir=$1
	shift
	for tap_f in "$@"; do
		[ -r "$tap_dir/$tap_f" ] || bail "$tap_dir/$tap_f is missing (build the guest with tools/build-guest)"
	done
}

# need_agent_image: bail out unless $guestdir has the kernel (x86's vmlinux,
# arm64's Image: $kernel_name) and $MAYFLY_TEST_DATA the Debian agent image
# (tools/build-guest --agent), then $image.
need_agent_image() {
	image=${MAYFLY_TEST_DATA:-}/agent.ext4
	kernel_name=vmlinux
	[ "$(uname -m)" != aarch64 ] || kernel_name=Image
	[ -r "$guestdir/$kernel_name" ] || bail "$guestdir/$kernel_name is missing (tools/build-guest)"
	[ -n "${MAYFLY_TEST_DATA:-}" ] && [ -r "$image" ] ||
		bail "no agent image at \$MAYFLY_TEST_DATA/agent.ext4 (tools/build-guest --agent)"
}

# agent_guest: $work/guest, the kernel and the agent image (links) as mayfly
# run's default guest: its root is the agent image once the directory has
# agent.ext4. Exports MAYFLY_GUEST_DIR, and MAYFLY_CACHE=$work/cache.
agent_guest() {
	mkdir "$work/guest"
	ln -s "$(cd "$guestdir" && pwd)/$kernel_name" "$work/guest/$kernel_name"
	ln -s "$image" "$work/guest/agent.ext4"
	export MAYFLY_GUEST_DIR="$work/guest" MAYFLY_CACHE="$work/cache"
}

# ---- points ----------------------------------------------------------------

# fail REASON...: the current point fails, for REASON.
fail() {
	if [ "$tap_reasons" = all ]; then
		why="${why:+$why; }$*"
	elif [ -z "$why" ]; then
		why=$*
	fi
}

# tap DESCRIPTION...: report the checks made since the last point.
tap() {
	n=$((n + 1))
	tap_before
	if [ -z "$why" ]; then
		echo "ok $n - $*"
	else
		if [ "$tap_why" = inline ]; then
			echo "not ok $n - $* # $why"
		else
			echo "not ok $n - $*"
		fi
		failed=$((failed + 1))
		tap_diag
	fi
	tap_after
	why=""
}

# tap_skip DESCRIPTION REASON: a point not run: "ok N - DESCRIPTION # SKIP
# REASON" (an empty DESCRIPTION: "ok N - # SKIP REASON").
tap_skip() {
	n=$((n + 1))
	echo "ok $n - ${1:+$1 }# SKIP $2"
}

# tap_end: the plan ("1..N", the points so far), then tap_exit.
tap_end() {
	echo "1..$n"
	tap_exit
}

# tap_exit: exit 1 when a point failed, else 0 (a runner that printed its
# plan first ends with this).
tap_exit() {
	[ "$failed" -eq 0 ] || exit 1
	exit 0
}

# tap_tail [-n] LINES PREFIX FILE...: the last LINES lines of each FILE that
# is not empty, each after PREFIX (-n: after PREFIX, the file's name and
# ": "): a failed point's diagnostics.
tap_tail() {
	tap_named=0
	if [ "$1" = -n ]; then
		tap_named=1
		shift
	fi
	tap_lines=$1
	tap_prefix=$2
	shift 2
	for tap_f in "$@"; do
		[ -s "$tap_f" ] || continue
		tap_p=$tap_prefix
		[ "$tap_named" = 0 ] || tap_p="$tap_prefix$(basename "$tap_f"): "
		tail -n "$tap_lines" "$tap_f" | sed "s|^|$tap_p|"
	done
}

# ---- a run of mayfly, and checks of the last run ---------------------------

# mf ARGS...: mayfly ARGS, bounded by timeout(1) after $case_timeout s, stdin
# /dev/null; stdout in $work/out, stderr in $work/err, status in $rc.
mf() {
	timeout -k 5 "$case_timeout" "$mayfly" "$@" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
}

# want_rc STATUS: the last run exited STATUS ("exit $rc, want STATUS"). With
# tap_timeouts=WORDS (runs bounded by timeout(1) after $case_timeout s), a
# timeout's kill (124, 137, 143) is named as such and another status reads
# "WORDS $rc, want STATUS".
want_rc() {
	[ "$rc" -eq "$1" ] && return
	case ${tap_timeouts:+$rc} in
	124 | 137 | 143) fail "timed out after ${case_timeout}s (exit $rc), want exit $1" ;;
	*) fail "${tap_timeouts:-exit} $rc, want $1" ;;
	esac
}

# want_line LINE: the last run's stdout ($tap_stdout, else $work/out) has
# exactly this line.
want_line() {
	grep -qxF -- "$1" "${tap_stdout:-$work/out}" || fail "stdout lacks the line \"$1\""
}

# want_err_re ERE: its stderr ($work/err) has a line matching ERE, case aside.
want_err_re() {
	grep -qiE -- "$1" "$work/err" || fail "stderr lacks /$1/"
}

# has FILE TEXT: FILE holds TEXT (a fixed string); the reason shows its start.
has() {
	grep -qF -- "$2" "$1" 2>/dev/null || fail "$(basename "$1") lacks '$2': $(head -c 300 "$1" 2>/dev/null)"
}

# tap_run_diag [HEADING]: a failed point's diagnostics, once per run (a run
# sets diag_shown=0): its command line ($cmd) and exit status ($rc), then its
# stdout and stderr ($work/out, $work/err) through the runner's show FILE,
# headed "stdout" and "stderr" with HEADING after.
tap_run_diag() {
	[ "$diag_shown" = 1 ] && return
	diag_shown=1
	echo "#   command: $cmd"
	echo "#   exit status: $rc"
	echo "#   stdout${1:-}:"
	show "$work/out"
	echo "#   stderr${1:-}:"
	show "$work/err"
}

# tap_printable: stdin as diagnostics: each line cut to 200 characters, any
# byte but printable ASCII shown as "?", after "#     ".
tap_printable() {
	cut -c 1-200 | tr -c '\n\040-\176' '?' | sed 's/^/#     /'
}

# ---- processes (busybox has no pgrep) ---------------------------------------

# children_of PID: the pids whose parent is PID.
children_of() {
	for tap_d in /proc/[0-9]*; do
		[ "$(sed -n 's/^PPid:[[:space:]]*//p' "$tap_d/status" 2>/dev/null)" = "$1" ] && echo "${tap_d#/proc/}"
	done
}

# named NAME: the pids of the processes called NAME.
named() {
	for tap_d in /proc/[0-9]*; do
		[ "$(sed -n 's/^Name:[[:space:]]*//p' "$tap_d/status" 2>/dev/null)" = "$1" ] && echo "${tap_d#/proc/}"
	done
}
