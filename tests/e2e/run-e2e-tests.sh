#!/bin/sh
# shellcheck disable=SC2016,SC2317 # guest commands are single-quoted on purpose; wait_until and the trap call functions indirectly
# run-e2e-tests.sh - boot the default Linux guest (stripped 6.1 kernel, busybox
# initramfs) under mayfly and check it end to end; report TAP.
#
# usage: run-e2e-tests MAYFLY GUESTDIR JSONCHECK
#   MAYFLY    the mayfly binary
#   GUESTDIR  the default guest as tools/build-guest leaves it (.cache/guest):
#             vmlinux, bzImage, initramfs.cpio.gz, rootfs.ext4; and container.ext4,
#             a container's root (e2e-suite makes it with make-container-ext4;
#             without it the container points are skipped)
#
# Needs a /dev/kvm that runs a Linux guest and its user space: a real host, or the
# nested harness's L1 (tests/e2e/e2e-suite picks; see tests/run-in-kvm).
#
# Environment: E2E_CASE_TIMEOUT  seconds allowed for one mayfly run (default 120);
#              E2E_FLOOD_LINES   lines the output-flood case prints (default 20000).
# Output: TAP on stdout. A failing point is followed by "# " lines with the command,
# its exit status and the last 30 lines of its stdout and stderr. Every boot adds a
# "# timing:" comment (wall time of the run, and the guest's boot timer).
# Exit status: 0 all passed, 1 a point failed, 2 usage, 3 could not run ("Bail out!").
#
# POSIX sh with busybox tools only: it also runs inside the harness's minimal L1.
# Every mayfly run is bounded by timeout(1).

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail cut tr wc mkfifo mktemp sleep rm seq cmp sha256sum dd stat od pgrep
[ $# -eq 3 ] || usage "run-e2e-tests MAYFLY GUESTDIR JSONCHECK"
mayfly=$1
guestdir=$2
jsoncheck=$3
case_timeout=${E2E_CASE_TIMEOUT:-120}
flood=${E2E_FLOOD_LINES:-20000}

case $case_timeout$flood in *[!0-9]*) bail "E2E_CASE_TIMEOUT and E2E_FLOOD_LINES must be numbers" ;; esac
if [ "$case_timeout" -eq 0 ]; then
	bail "E2E_CASE_TIMEOUT must be more than 0"
fi
need_mayfly
need_guest "$guestdir" vmlinux initramfs.cpio.gz rootfs.ext4
need_kvm e2e-suite

# The default guest: `mayfly boot` without --kernel boots $MAYFLY_GUEST_DIR/vmlinux
# with its initramfs.cpio.gz.
export MAYFLY_GUEST_DIR="$guestdir"

tap_workdir e2e-tests
# mayfly run restores its default snapshot, made on first use in the cache.
export MAYFLY_CACHE="$work/cache"
vm=""
tap_cleanup() {
	exec 3>&-
	[ -n "$vm" ] && kill "$vm" 2>/dev/null
}

# ---- running mayfly ---------------------------------------------------------

# State of the last run: its command line (for the diagnostics), exit status,
# stdout in $work/out (raw) and $work/txt (CRs removed), stderr in $work/err.
cmd=""
rc=0
diag_shown=0
tap_stdout=$work/txt   # what want_line reads
runs=0
ready_us=""

# quote WORD: WORD as a sh word, for showing a command line.
quote() {
	case $1 in
	*[!A-Za-z0-9_./=:,+-]* | '') printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
	*) printf '%s' "$1" ;;
	esac
}

# set_cmd ARGS...: remember the mayfly command line for the diagnostics.
set_cmd() {
	cmd="MAYFLY_GUEST_DIR=$guestdir mayfly boot"
	for a in "$@"; do
		cmd="$cmd $(quote "$a")"
	done
	diag_shown=0
}

# now_cs: centiseconds since boot (empty without /proc/uptime).
now_cs() {
	up=""
	read -r up _ </proc/uptime 2>/dev/null || true
	case $up in
	*.??) echo "${up%.*}${up#*.}" | sed 's/^0*\([0-9]\)/\1/' ;;
	*) echo "" ;;
	esac
}

# after_run START_CS: post-process a finished run and print its timing comment.
after_run() {
	tr -d '\r' <"$work/out" >"$work/txt"
	ready_us=$(sed -n 's/.*boot timer: guest ready after \([0-9][0-9]*\) us.*/\1/p' "$work/err" | head -n 1)
	runs=$((runs + 1))
	end=$(now_cs)
	wall="?"
	if [ -n "$1" ] && [ -n "$end" ]; then
		t=$((end - $1))
		wall="$((t / 100)).$((t / 10 % 10))$((t % 10)) s"
	fi
	echo "# timing: run $runs: exit $rc after $wall wall; guest ready after ${ready_us:-?} us ($cmd)"
}

# boot ARGS...: run `mayfly boot -v ARGS` with stdin from /dev/null.
boot() {
	set_cmd -v "$@"
	start=$(now_cs)
	timeout -k 5 "$case_timeout" "$mayfly" boot -v "$@" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
	after_run "$start"
}

# vm_running: the background mayfly of boot_console has not ended yet.
vm_running() {
	[ -n "$vm" ] && kill -0 "$vm" 2>/dev/null
}

# prompts: how many shell prompts (PS1 is '\u@\h:\w\$ ') stdout holds so far.
prompts() {
	tr -d '\r' <"$work/out" | grep -oE '[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:[^ ]*[#$] ' | wc -l
}

# wait_until WHAT TEST...: poll TEST until it holds; false when the VM ended
# first or $case_timeout passed (a "fail" names WHAT).
wait_until() {
	what=$1
	shift
	polls=$((case_timeout * 5))
	while [ "$polls" -gt 0 ]; do
		"$@" && return 0
		if ! vm_running; then
			"$@" && return 0
			fail "mayfly ended before $what"
			return 1
		fi
		sleep 0.2
		polls=$((polls - 1))
	done
	fail "no $what within ${case_timeout}s"
	return 1
}

have_prompts() { [ "$(prompts)" -ge "$1" ]; }
have_line() { tr -d '\r' <"$work/out" | grep -qxF -- "$1"; }

# boot_console ARGS...: an interactive console whose stdin is a FIFO this script
# writes to. Typing waits for the shell's prompt, so no input arrives before the
# shell reads the console: first `echo typed-$((6*7))` (echoed as typed, and the
# arithmetic makes the answer "typed-42" tell the output apart from the echo),
# then, after its answer and the next prompt, `exit 0`.
boot_console() {
	set_cmd -v "$@"
	cmd="$cmd <FIFO (after a prompt: 'echo typed-\$((6*7))', then 'exit 0')"
	rm -f "$work/in"
	mkfifo "$work/in" || bail "mkfifo failed"
	start=$(now_cs)
	timeout -k 5 "$case_timeout" "$mayfly" boot -v "$@" <"$work/in" >"$work/out" 2>"$work/err" &
	vm=$!
	exec 3>"$work/in"   # returns once mayfly's side has opened it
	if wait_until "the first shell prompt" have_prompts 1; then
		printf '%s\n' 'echo typed-$((6*7))' >&3
		if wait_until "the line typed-42" have_line typed-42 &&
			wait_until "the second shell prompt" have_prompts 2; then
			printf '%s\n' 'exit 0' >&3
		fi
	fi
	wait "$vm"
	rc=$?
	vm=""
	exec 3>&-
	after_run "$start"
}

# ---- checks and TAP (tap.sh) -------------------------------------------------

tap_reasons=all   # a failed point names every check that failed
tap_timeouts="mayfly exited"

# want_out_re ERE: stdout has a line matching ERE.
want_out_re() {
	grep -qE -- "$1" "$work/txt" || fail "stdout lacks /$1/"
}

# want_status N: the guest's init reported "mayfly: exit status N" (the last one;
# it may follow output that did not end in a newline).
want_status() {
	got=$(grep -oE 'mayfly: exit status [0-9]+' "$work/txt" | tail -n 1)
	if [ -z "$got" ]; then
		fail "no \"mayfly: exit status\" line on stdout, want status $1"
	elif [ "$got" != "mayfly: exit status $1" ]; then
		fail "guest reported \"$got\", want status $1"
	fi
}

# A failed point shows its run (once): the command, its exit status, and the
# last 30 lines of its stdout and stderr.
show() {
	tail -n 30 "$1" | tr -d '\r' | tap_printable
}
tap_diag() {
	tap_run_diag " (last 30 lines)"
}

# ---- the cases --------------------------------------------------------------

# The default guest (no --kernel): a command's output and its exit status.
boot --init-cmd 'echo hello-from-guest; uname -r'
want_line hello-from-guest
want_out_re '^[0-9]+\.[0-9]+(\.[0-9]+)?[^ ]*$'
tap "the guest command's output reaches the host (echo, uname -r)"
want_status 0
want_rc 0
tap "the command's status line comes back and the guest's reboot exits 0"
if [ -z "$ready_us" ]; then
	fail "stderr lacks \"boot timer: guest ready after N us\""
elif [ "$ready_us" -le 0 ]; then
	fail "boot timer reported $ready_us us, want more than 0"
fi
tap "the guest's init fires the boot timer and -v reports it (N > 0 us)"

boot --init-cmd 'exit 7'
want_status 7
tap "the command's exit status comes back (exit 7)"
want_rc 7
want_err_re 'info: vm stopped: .*status 7'
tap "mayfly boot --init-cmd exits with the command's status (exit 7)"

boot --init-cmd true --timings "$work/timings.json"
want_status 0
want_rc 0
tap "mayfly boot --init-cmd true exits 0"

boot --init-cmd true --timings "$work/timings.json"
want_rc 0
[ "$(wc -l <"$work/timings.json")" -eq 2 ] || fail "--timings FILE has $(wc -l <"$work/timings.json") lines after two boots, want 2"
"$jsoncheck" <"$work/timings.json" >/dev/null || fail "a --timings line is not strict JSON"
for p in cgroup_made vm_forked jail_started memory_mapped guest_loaded vm_created devices_ready jail_entered first_kvm_run guest_init; do
	grep -q "\"$p\":[0-9]" "$work/timings.json" || fail "--timings lacks the phase $p"
done
grep -q '"vm_exits":{[^}]*"io":[1-9]' "$work/timings.json" || fail "--timings counts no port I/O exits (the console's)"
tap "mayfly boot --timings FILE: a strict JSON line per boot, appended, with every phase of a cold boot and its VM exits"

for cpus in 2 4; do
	boot --cpus "$cpus" --init-cmd \
		'echo ncpu=$(grep -c ^processor /proc/cpuinfo); echo online=$(cat /sys/devices/system/cpu/online)'
	want_line "ncpu=$cpus"
	want_line "online=0-$((cpus - 1))"
	want_status 0
	want_rc 0
	tap "--cpus $cpus: all $cpus CPUs online (/proc/cpuinfo, online 0-$((cpus - 1)))"
done

boot_console --console --cmdline-append mayfly.shell=1
want_line typed-42
tap "the interactive console runs a typed command (typed-42)"
want_status 0
want_rc 0
tap "the shell's 'exit 0' ends the VM with status 0"

# init exits at once: the kernel panics ("Attempted to kill init!"), and panic=1
# resets the machine a second later.
boot --cmdline-append rdinit=/bin/false
want_rc 8
tap "a guest kernel panic ends the VM with exit 8"
want_out_re 'Kernel panic - not syncing'
want_err_re 'panic'
tap "the panic is on the console and named on stderr"

if [ -r "$guestdir/bzImage" ]; then
	boot --kernel "$guestdir/bzImage" --initrd "$guestdir/initramfs.cpio.gz" \
		--init-cmd 'echo bzimage-$((6*7))'
else
	set_cmd --kernel "$guestdir/bzImage"
	rc=127
	: >"$work/out"
	: >"$work/txt"
	echo "run-e2e-tests: $guestdir/bzImage does not exist" >"$work/err"
fi
want_line bzimage-42
want_status 0
want_rc 0
tap "the bzImage boots too and runs the command (bzimage-42)"

boot --mem 128 --init-cmd 'grep ^MemTotal: /proc/meminfo'
kb=$(sed -n 's/^MemTotal: *\([0-9][0-9]*\) kB$/\1/p' "$work/txt" | head -n 1)
if [ -z "$kb" ]; then
	fail "stdout lacks a \"MemTotal: N kB\" line"
elif [ "$kb" -le 98304 ] || [ "$kb" -gt 131072 ]; then
	fail "MemTotal $kb kB, want more than 96 MiB and at most 128 MiB"
fi
want_status 0
want_rc 0
tap "--mem 128: MemTotal between 96 and 128 MiB${kb:+ ($kb kB)}"

# ---- virtio-blk and the copy-on-write root -----------------------------------

rootfs=$guestdir/rootfs.ext4
base_sum=$(sha256sum "$rootfs" | cut -d' ' -f1)
base_mtime=$(stat -c %Y "$rootfs")

boot --rootfs "$rootfs" --init-cmd 'grep " / " /proc/mounts; echo blocks=$(cat /sys/block/vda/size)'
want_out_re '^/dev/root / ext4 rw'
want_line "blocks=$(($(stat -c %s "$rootfs") / 512))"
want_status 0
want_rc 0
tap "--rootfs boots the ext4 image on virtio-blk as a read-write root (/dev/vda, full size)"

# 50 MiB through the page cache to the disk and back: written, synced, the
# cache dropped, read again with O_DIRECT (straight from the device) and
# compared with a second copy of the same bytes kept in the guest's tmpfs. The
# data is one random MiB repeated with a counter between copies, so no two
# blocks at the same offset match and nothing reads as zeros (the base's free
# space is zeros). cmp, not sha256: hashing 100 MiB costs a minute under
# nested emulation.
big='up() { cut -d" " -f1 /proc/uptime; }
gen() { i=0; while [ $i -lt 50 ]; do cat /tmp/chunk; echo $i; i=$((i+1)); done | head -c 52428800; }
head -c 1048576 /dev/urandom >/tmp/chunk; gen >/tmp/want.bin
t0=$(up); cp /tmp/want.bin /big.bin; sync; t1=$(up)
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; t2=$(up)
if dd if=/big.bin bs=1M iflag=direct 2>/dev/null | cmp -s - /tmp/want.bin; then echo big-file-ok; else echo big-file-BAD; fi
echo "guest-timing: write+sync $t0-$t1 s, read back and compare $t2-$(up) s"
echo size=$(stat -c %s /big.bin)'
boot --rootfs "$rootfs" --init-cmd "$big"
grep '^guest-timing:' "$work/txt" | sed 's/^/# /'
want_line size=52428800
want_line big-file-ok
want_status 0
want_rc 0
tap "the guest writes a 50 MiB file on its root and reads the same bytes back from the device"

boot --rootfs "$rootfs" --init-cmd 'if [ -e /big.bin ]; then echo leaked; else echo fresh-root; fi'
want_line fresh-root
want_status 0
tap "a second VM from the same base does not see the first VM's file"

sum=$(sha256sum "$rootfs" | cut -d' ' -f1)
[ "$sum" = "$base_sum" ] || fail "rootfs.ext4's sha256 changed: $base_sum before, $sum after"
[ "$(stat -c %Y "$rootfs")" = "$base_mtime" ] || fail "rootfs.ext4's mtime changed"
tap "the base image is byte for byte unchanged (sha256, mtime) after both VMs"

# Two VMs on one base at once: each writes its own name to the same path,
# waits until both have, and must read back its own.
# Boots take seconds in step; 5 s of sleep keeps the two runs overlapping.
both='echo $NAME >/who.txt; sync; sleep 5; echo "saw=$(cat /who.txt)"'
set_cmd --id vm-a --rootfs "$rootfs" --init-cmd "NAME=vm-a; ..." "(and vm-b at the same time)"
start=$(now_cs)
timeout -k 5 "$case_timeout" "$mayfly" boot --id vm-a --rootfs "$rootfs" --init-cmd "NAME=vm-a; $both" \
	</dev/null >"$work/out-a" 2>"$work/err-a" &
pid_a=$!
timeout -k 5 "$case_timeout" "$mayfly" boot --id vm-b --rootfs "$rootfs" --init-cmd "NAME=vm-b; $both" \
	</dev/null >"$work/out-b" 2>"$work/err-b"
rc_b=$?
wait "$pid_a"
rc_a=$?
{ tr -d '\r' <"$work/out-a"; echo "--- vm-b:"; tr -d '\r' <"$work/out-b"; } >"$work/out"
cat "$work/err-a" "$work/err-b" >"$work/err"
rc=$((rc_a + rc_b))
after_run "$start"
tr -d '\r' <"$work/out-a" | grep -qxF saw=vm-a || fail "vm-a did not read back its own file"
tr -d '\r' <"$work/out-b" | grep -qxF saw=vm-b || fail "vm-b did not read back its own file"
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || fail "exit codes $rc_a and $rc_b, want 0 and 0"
tap "two VMs on the same base at the same time each see only their own writes"
sum=$(sha256sum "$rootfs" | cut -d' ' -f1)
[ "$sum" = "$base_sum" ] || fail "rootfs.ext4's sha256 changed while two VMs ran"
tap "the base image is still unchanged after two concurrent VMs"

# A raw --disk is written through; a ,ro one refuses writes.
dd if=/dev/zero of="$work/data.img" bs=1024 count=1024 2>/dev/null
boot --disk "$work/data.img" --init-cmd 'printf mayfly-raw-disk | dd of=/dev/vda bs=512 seek=3 conv=sync,fsync 2>/dev/null; echo wrote=$?'
want_line wrote=0
want_status 0
got=$(dd if="$work/data.img" bs=512 skip=3 count=1 2>/dev/null | head -c 15)
[ "$got" = mayfly-raw-disk ] || fail "data.img sector 3 holds '$got', want 'mayfly-raw-disk'"
tap "--disk PATH: the guest's writes reach the file (sector 3)"

cp "$work/data.img" "$work/before.img"
boot --disk "$work/data.img,ro" --init-cmd 'echo ro=$(cat /sys/block/vda/ro); if printf x | dd of=/dev/vda conv=fsync 2>/dev/null; then echo write-ok; else echo write-refused; fi'
want_line ro=1
want_line write-refused
cmp -s "$work/data.img" "$work/before.img" || fail "data.img changed under a read-only --disk"
tap "--disk PATH,ro: the guest sees a read-only disk and the file does not change"

# ---- mayfly run: the guest agent over vsock ----------------------------------

# run_sub COMMAND LIMIT ARGS...: `mayfly COMMAND ARGS`, bounded by LIMIT
# seconds, stdin from $run_in (default /dev/null), stdout and stderr kept apart.
run_in=/dev/null
run_sub() {
	sub=$1 limit=$2
	shift 2
	cmd="MAYFLY_GUEST_DIR=$guestdir mayfly $sub"
	for a in "$@"; do
		cmd="$cmd $(quote "$a")"
	done
	diag_shown=0
	start=$(now_cs)
	timeout -k 5 "$limit" "$mayfly" "$sub" "$@" <"$run_in" >"$work/out" 2>"$work/err"
	rc=$?
	run_in=/dev/null
	after_run "$start"
}
# run_vm ARGS...: `mayfly run ARGS` (the default guest's rootfs.ext4).
run_vm() { run_sub run "$case_timeout" "$@"; }
want_err_line() {
	tr -d '\r' <"$work/err" | grep -qxF -- "$1" || fail "stderr lacks the line \"$1\""
}

run_vm -- echo hello-from-run
want_line hello-from-run
[ "$(wc -l <"$work/txt")" -eq 1 ] || fail "stdout has more than the command's one line"
want_rc 0
tap "mayfly run: the command's output, and nothing else, on stdout; exit 0"

run_vm -- sh -c 'echo to-out; echo to-err >&2; exit 7'
want_line to-out
want_err_line to-err
grep -qF to-err "$work/txt" && fail "stderr's line leaked into stdout"
want_rc 7
tap "mayfly run: stdout and stderr stay apart; the command's exit code 7 is mayfly's"

run_vm -- sh -c 'kill -TERM $$'
want_rc 143
tap "mayfly run: a command killed by SIGTERM exits 128+15"

run_vm -- /no/such/program
want_rc 127
want_err_re 'no/such/program'
tap "mayfly run: a missing program exits 127 with one line naming it"

run_vm --timeout 2 -- sleep 60
want_rc 124
want_err_re 'timed out'
tap "mayfly run --timeout 2: a command that runs on is killed, exit 124"

run_vm --env GREETING=hi-env --cwd /tmp -- sh -c 'echo "$GREETING in $(pwd)"'
want_line "hi-env in /tmp"
want_rc 0
tap "mayfly run --env --cwd: the command gets the environment and directory"

printf 'line-one\nline-two\n' >"$work/in.txt"
run_in=$work/in.txt
run_vm --stdin - -- sh -c 'cat; echo stdin-done'
want_line line-two
want_line stdin-done
want_rc 0
tap "mayfly run --stdin -: the command reads mayfly's stdin to its end"

run_vm --tty -- sh -c 'if [ -t 0 ] && [ -t 1 ]; then echo on-a-tty; fi; stty size; echo via-err >&2'
want_line on-a-tty
want_line "24 80"
want_line via-err
want_rc 0
tap "mayfly run --tty: the command runs on a 24x80 terminal, its stderr on the same stream"

head -c 300000 /dev/urandom >"$work/put.bin"
run_vm --put "$work/put.bin:/root/in.bin" --get "/root/out.bin:$work/got.bin" -- \
	sh -c 'cp /root/in.bin /root/out.bin && echo copied'
want_line copied
want_rc 0
cmp -s "$work/put.bin" "$work/got.bin" || fail "the file that came back differs from the one put in"
tap "mayfly run --put/--get: a 300 KB binary file goes in and comes back the same"

run_vm --json -- sh -c 'echo json-out; echo json-err >&2; exit 3'
grep -q '^{"event":"started","pid":[0-9]*}$' "$work/txt" || fail "no started event"
grep -qF '{"event":"stdout","data":"json-out\n"}' "$work/txt" || fail "no stdout event with json-out"
grep -qF '{"event":"stderr","data":"json-err\n"}' "$work/txt" || fail "no stderr event with json-err"
grep -q '^{"event":"exit","code":3,.*"exit_code":3,"truncated":false}$' "$work/txt" || fail "no exit event with code 3"
grep -q '^{"event":"timings","restored":true,"vmm_setup_ms":' "$work/txt" || fail "no timings event (restored)"
want_rc 3
"$jsoncheck" <"$work/out" >/dev/null || fail "a --json line is not strict JSON"
tap "mayfly run --json: started, stdout, stderr, exit and timings events, one per line"

# ---- mayfly bench: each run's phases, the table, the record, compare ---------

# bench_vm ARGS...: `mayfly bench ARGS`; its runs are bounded together.
bench_vm() { run_sub bench $((case_timeout * 4)) "$@"; }

bench_vm boot --runs 5 --warmup 0 --json "$work/boot.json" --svg "$work/boot.svg" -- echo hi
want_rc 0
bench_n=$("$jsoncheck" --bench boot <"$work/boot.json") || fail "a boot run's phases are missing or out of order (jsoncheck --bench)"
[ "${bench_n:-0}" -eq 5 ] || fail "$bench_n measured runs in the record, want 5"
grep -q '^exit  *5 ' "$work/txt" || fail "the table has no exit row over 5 runs"
grep -q '^guest_init  *5 ' "$work/txt" || fail "the table has no guest_init row"
grep -q '<svg ' "$work/boot.svg" && grep -q '</svg>' "$work/boot.svg" || fail "no whole SVG"
tap "mayfly bench boot --runs 5: every run's 16 phases, each at or after the one before, in strict JSON lines; the table and the SVG"

bench_vm restore --runs 5 --json "$work/restore.json" -- echo hi
want_rc 0
bench_n=$("$jsoncheck" --bench restore <"$work/restore.json") || fail "a restore's phases are missing or out of order (jsoncheck --bench)"
[ "${bench_n:-0}" -eq 5 ] || fail "$bench_n measured runs in the record, want 5"
grep -q '"warmup":true' "$work/restore.json" || fail "the warm-up run is not in the record"
tap "mayfly bench restore --runs 5: a restore's 14 phases in order (no kernel load, no init), the warm-up run marked"

bench_vm fork --runs 3 --warmup 0 --json "$work/fork.json" -- echo hi
want_rc 0
bench_n=$("$jsoncheck" --bench fork <"$work/fork.json") || fail "a fork's phases are missing or out of order (jsoncheck --bench)"
[ "${bench_n:-0}" -eq 3 ] || fail "$bench_n measured runs in the record, want 3"
grep -q '^forked  *3 ' "$work/txt" || fail "the table has no forked row"
ls -d "${TMPDIR:-/tmp}"/mayfly-bench-fork.* 2>/dev/null && fail "bench fork left its directory"
tap "mayfly bench fork --runs 3: a parent forked for each run, the child restored from the fork: 15 phases in order, nothing left"

bench_vm density --count 3 --json "$work/density.json"
want_rc 0
[ "$(grep -c '"type":"density"' "$work/density.json")" -eq 3 ] || fail "not one density line per VM (3 VMs, each a tenth)"
grep -q '"type":"density","vms":3,.*"pss_kib":[1-9][0-9]*,' "$work/density.json" || fail "no PSS for 3 VMs"
grep -q '"type":"answering","vms":3,"answered":3}' "$work/density.json" || fail "not every idle VM answered"
grep -q '^ *3  *[0-9]' "$work/txt" || fail "the table has no row for 3 VMs"
ls -d "${TMPDIR:-/tmp}"/mayfly-bench-density.* 2>/dev/null && fail "bench density left its directory"
pgrep -f 'mayfly.*boot --vsock' >/dev/null && fail "bench density left a VM running"
tap "mayfly bench density --count 3: three idle VMs from the default snapshot, PSS and the host's memory per VM, each still answers; nothing left"

bench_vm compare "$work/restore.json" "$work/restore.json"
want_rc 0
bench_rows=$(grep -c 'no significant difference' "$work/txt")
[ "$bench_rows" -ge 12 ] || fail "only $bench_rows rows say no significant difference"
grep -q 'B slower\|B faster' "$work/txt" && fail "a run compared with itself differs"
tap "mayfly bench compare: a benchmark against itself, no significant difference in any of its phases (exit 0)"

bench_vm run --runs 1 --warmup 0 -- sh -c 'exit 3'
want_rc 125
want_err_re 'run 1 exited 3'
tap "mayfly bench: a run whose command fails ends the benchmark with one line naming it, exit 125"

# Random bytes on both streams: every line still strict JSON (RFC 8259,
# strict UTF-8), read by jansson with duplicates refused.
run_vm --json -- sh -c 'head -c 200000 /dev/urandom; head -c 50000 /dev/urandom >&2'
want_rc 0
jl=$("$jsoncheck" <"$work/out") || fail "a --json line of random output is not strict JSON"
[ "${jl:-0}" -gt 3 ] || fail "only ${jl:-0} JSON lines for 250 KB of output"
tap "mayfly run --json: random bytes on stdout and stderr, every line strict JSON"

# Live streaming: the first line must reach us while the command still runs.
set_cmd run -- sh -c 'echo early-line; sleep 8; echo late-line'
# A background job truncates its files only once it runs: empty them first,
# or the wait below may read the last point's output.
: >"$work/out"
: >"$work/err"
start=$(now_cs)
timeout -k 5 "$case_timeout" "$mayfly" run -- sh -c 'echo early-line; sleep 8; echo late-line' \
	</dev/null >"$work/out" 2>"$work/err" &
vm=$!
i=0
while [ $i -lt 600 ] && ! grep -qxF early-line "$work/out" && vm_running; do
	sleep 0.1
	i=$((i + 1))
done
if ! grep -qxF early-line "$work/out"; then
	fail "the first line never arrived"
elif grep -qxF late-line "$work/out" || ! vm_running; then
	fail "the first line only arrived with the rest, after the command ended"
fi
wait "$vm"
rc=$?
vm=""
after_run "$start"
want_line late-line
want_rc 0
tap "mayfly run streams output as it is produced (a line arrives while the command sleeps)"

# The first SIGTERM (or SIGINT: Ctrl-C) goes to the command, whose own exit
# comes back. SIGTERM here: a background job of a script ignores SIGINT.
set_cmd run -- sh -c 'trap "echo got-sigterm; exit 5" TERM; echo ready; while :; do sleep 1; done' "(then SIGTERM)"
: >"$work/out"
: >"$work/err"
start=$(now_cs)
"$mayfly" run -- sh -c 'trap "echo got-sigterm; exit 5" TERM; echo ready; while :; do sleep 1; done' \
	</dev/null >"$work/out" 2>"$work/err" &
vm=$!
i=0
while [ $i -lt 600 ] && ! grep -qxF ready "$work/out" && vm_running; do
	sleep 0.1
	i=$((i + 1))
done
kill -TERM "$vm" 2>/dev/null
i=0
while [ $i -lt 300 ] && vm_running; do
	sleep 0.1
	i=$((i + 1))
done
vm_running && { kill -KILL "$vm"; fail "mayfly run did not end within 30 s of SIGTERM"; }
wait "$vm"
rc=$?
vm=""
after_run "$start"
want_line got-sigterm
want_rc 5
tap "mayfly run passes SIGTERM to the command, and its exit code (5) comes back"

ls -d /tmp/mayfly-run-* >/dev/null 2>&1 && fail "a /tmp/mayfly-run-* directory was left behind"
tap "mayfly run leaves no temporary directory or socket behind"

# One VM, several calls: mayfly boot --vsock, then mayfly exec and mayfly cp.
sock=$work/vm.sock
set_cmd --rootfs "$rootfs" --vsock "$sock" "(in the background)"
start=$(now_cs)
"$mayfly" boot --rootfs "$rootfs" --vsock "$sock" </dev/null >"$work/boot.out" 2>"$work/boot.err" &
vm=$!
vsock_vm_points "$vm" "$sock" "after_run $start"

# ---- a container's root: the containerd shim's VM ------------------------------

# The VM's root stays the default initramfs (mayfly's init and agent); the image is
# its copy-on-write /dev/vda, which init mounts at /run/mayfly/rootfs; mayfly exec
# --root runs a process chrooted there (PROTO_EXEC_ROOT), --user as uid 1000.
ctr=$guestdir/container.ext4
ctr_root=/run/mayfly/rootfs
# ctr_exec ARGS...: mayfly exec into the container VM, stdout and stderr apart.
ctr_exec() {
	cmd="mayfly exec --vsock $csock $*"
	diag_shown=0
	timeout -k 5 "$case_timeout" "$mayfly" exec --vsock "$csock" "$@" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
	tr -d '\r' <"$work/out" >"$work/txt"
}
if ! [ -r "$ctr" ]; then
	tap_skip "a container's root: a process in it sees the image's files as uid 1000" "no $ctr (tests/e2e/e2e-suite makes it)"
	tap_skip "a container's root: its writes stay in the VM, the image is unchanged" "no $ctr"
else
	ctr_sum=$(sha256sum "$ctr" | cut -d' ' -f1)
	csock=$work/ctr.sock
	start=$(now_cs)
	"$mayfly" boot --initrd "$guestdir/initramfs.cpio.gz" --rootfs "$ctr" --vsock "$csock" \
		--cmdline-append "mayfly.container=/dev/vda mayfly.hostname=box" \
		</dev/null >"$work/ctr-boot.out" 2>"$work/ctr-boot.err" &
	vm=$!
	ctr_exec --root "$ctr_root" --user 1000:1000 -- sh -c \
		'echo "uid=$(id -u) gid=$(id -g) pwd=$(pwd)"; cat /data/hello; echo "host=$(hostname)/$(cat /etc/hostname)"; echo mine >/tmp/w && cat /tmp/w; ls /usr/lib/mayfly 2>/dev/null || echo no-mayfly-here'
	set_cmd --initrd initramfs.cpio.gz --rootfs container.ext4 --vsock S \
		--cmdline-append "mayfly.container=/dev/vda mayfly.hostname=box" "(then $cmd)"
	after_run "$start"
	want_line "uid=1000 gid=1000 pwd=/"
	want_line from-the-image
	want_line host=box/box
	want_line mine
	want_line no-mayfly-here
	want_rc 0
	ctr_exec --root "$ctr_root" -- /bin/no-such-program
	want_rc 127
	want_err_re 'no-such-program.*execve'
	tap "a container's root: a process in it sees the image's files as uid 1000, a missing program exits 127"

	ctr_exec --root "$ctr_root" -- sh -c 'echo changed >/data/hello; echo new >/data/new; sync; cat /data/hello /data/new'
	want_line changed
	want_line new
	want_rc 0
	kill -TERM "$vm" 2>/dev/null
	wait "$vm"
	vm_rc=$?
	vm=""
	[ "$vm_rc" -eq 143 ] || fail "the container VM exited $vm_rc on SIGTERM, want 143"
	grep -q 'mayfly-init:' "$work/ctr-boot.out" && fail "init complained: $(grep 'mayfly-init:' "$work/ctr-boot.out" | head -n 1)"
	sum=$(sha256sum "$ctr" | cut -d' ' -f1)
	[ "$sum" = "$ctr_sum" ] || fail "container.ext4's sha256 changed: $ctr_sum before, $sum after"
	tap "a container's root: its writes stay in the VM, the image is byte for byte unchanged (sha256)"
fi

if [ "$flood" -eq 0 ]; then
	tap_skip "a flood of guest output arrives whole" "E2E_FLOOD_LINES=0 (nested harness: see tests/e2e/e2e-suite)"
	tap_end
fi
boot --init-cmd "seq 1 $flood"
seq 1 "$flood" >"$work/want"
grep -xE '[0-9]+' "$work/txt" >"$work/got"
if ! cmp -s "$work/want" "$work/got"; then
	fail "stdout's number lines are not exactly 1..$flood ($(wc -l <"$work/got") lines, last: $(tail -n 1 "$work/got"))"
fi
last=$(grep -nxF "$flood" "$work/txt" | tail -n 1 | cut -d: -f1)
status_at=$(grep -n 'mayfly: exit status' "$work/txt" | tail -n 1 | cut -d: -f1)
if [ -z "$last" ] || [ -z "$status_at" ] || [ "$last" -ge "$status_at" ]; then
	fail "line $flood (line ${last:-none}) does not come before the status line (line ${status_at:-none})"
fi
want_status 0
want_rc 0
tap "a flood of guest output (seq 1 $flood) arrives whole and in order, the VM does not hang"

tap_end
