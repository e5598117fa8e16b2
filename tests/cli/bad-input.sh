#!/usr/bin/env bash
# bad-input.sh - every user mistake gives one clear stderr line and a distinct
# non-zero exit, never a signal, and leaves nothing behind. Prints TAP.
# usage: bad-input.sh MAYFLY GOOD_KERNEL
set -u
# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
mayfly=$1
good_kernel=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A failed point: the first lines of its stderr.
tap_diag() {
	sed 's/^/# /' "$tmp/err" | head -5
}

: > "$tmp/empty"
head -c 65536 /dev/urandom > "$tmp/garbage"
printf '\177ELF\002\001\001' > "$tmp/truncated-elf"
head -c 600 /dev/zero > "$tmp/zeros"
mkdir "$tmp/dir"
printf 'not json\n' > "$tmp/garbage-lines"
mkfifo "$tmp/fifo"
mkfifo "$tmp/fifo-vm.ctl"
install -m 600 /dev/null "$tmp/kvm-root-only"

# expect NAME WANT_CODE PATTERN -- ARGS...
expect() {
	local name=$1 want=$2 pattern=$3
	shift 4
	local out="$tmp/out" err="$tmp/err" code
	# -k: a case that ignores SIGTERM fails (137) instead of hanging the suite.
	timeout -k 5 20 "$@" > "$out" 2> "$err" < /dev/null
	code=$?
	local lines
	lines=$(wc -l < "$err")
	if [ "$code" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pattern" "$err"; then
		fail "exit $code (want $want), $lines stderr line(s)"
		tap "$name"
	else
		tap "$name: $(cat "$err")"
	fi
}

echo "1..88"
expect "no arguments" 2 "missing command" -- "$mayfly"
expect "unknown command" 2 "unknown command 'bogus'" -- "$mayfly" bogus
expect "unknown flag" 2 "unknown option '--bogus'" -- "$mayfly" boot --kernel "$good_kernel" --bogus
expect "flag without value" 2 "needs a value" -- "$mayfly" boot --kernel
expect "no kernel and no default guest" 3 "no default guest kernel" -- env MAYFLY_GUEST_DIR=/nonexistent "$mayfly" boot
expect "--mem 0" 2 "bad --mem '0': must be from 1 to 524288" -- "$mayfly" boot --kernel "$good_kernel" --mem 0
expect "absurd --mem" 2 "must be from 1 to 524288" -- "$mayfly" boot --kernel "$good_kernel" --mem 99999999999
expect "overflowing --mem" 2 "must be from 1 to 524288" -- "$mayfly" boot --kernel "$good_kernel" --mem 123456789012345678901234567890
expect "non-numeric --mem" 2 "bad --mem 'lots': not a whole number" -- "$mayfly" boot --kernel "$good_kernel" --mem lots
expect "--cpus 0" 2 "bad --cpus '0'" -- "$mayfly" boot --kernel "$good_kernel" --cpus 0
expect "absurd --cpus" 2 "must be from 1 to 254" -- "$mayfly" boot --kernel "$good_kernel" --cpus 100000
expect "missing kernel file" 3 "cannot open kernel" -- "$mayfly" boot --kernel "$tmp/nope"
expect "empty kernel" 3 "is empty" -- "$mayfly" boot --kernel "$tmp/empty"
expect "kernel is a directory" 3 "not a regular file" -- "$mayfly" boot --kernel "$tmp/dir"
expect "garbage kernel" 3 "kernel '$tmp/garbage'" -- "$mayfly" boot --kernel "$tmp/garbage"
expect "truncated ELF kernel" 3 "kernel '$tmp/truncated-elf'" -- "$mayfly" boot --kernel "$tmp/truncated-elf"
expect "zero-filled kernel" 3 "kernel '$tmp/zeros'" -- "$mayfly" boot --kernel "$tmp/zeros"
expect "missing initrd" 3 "cannot open initrd" -- "$mayfly" boot --kernel "$good_kernel" --initrd "$tmp/nope"
expect "missing KVM device" 4 "KVM device not found" -- "$mayfly" boot --kernel "$good_kernel" --kvm-device "$tmp/no-kvm"
expect "not a KVM device" 5 "unsupported KVM" -- "$mayfly" boot --kernel "$good_kernel" --kvm-device /dev/null
expect "missing rootfs image" 3 "rootfs '$tmp/nope'" -- "$mayfly" boot --kernel "$good_kernel" --rootfs "$tmp/nope"
expect "empty disk image" 3 "image is empty" -- "$mayfly" boot --kernel "$good_kernel" --disk "$tmp/empty"
expect "disk size not a multiple of 512" 3 "multiple of 512" -- "$mayfly" boot --kernel "$good_kernel" --disk "$tmp/zeros"
expect "disk is a directory" 3 "not a regular file" -- "$mayfly" boot --kernel "$good_kernel" --disk "$tmp/dir,ro"
expect "bad --disk option" 2 "bad --disk" -- "$mayfly" boot --kernel "$good_kernel" --disk "$tmp/x,rx"
long=$(head -c 1500 /dev/zero | tr '\0' a)
expect "kernel command line too long" 2 "longer than 2047 bytes" -- "$mayfly" boot --kernel "$good_kernel" --cmdline "$long" --cmdline-append "$long"
# Another VM holds the image: here this shell, with a shared flock on fd 9.
head -c 4096 /dev/zero > "$tmp/held.img"
exec 9< "$tmp/held.img"
flock -s 9
expect "disk in use by another VM" 3 "in use by another VM" -- "$mayfly" boot --kernel "$good_kernel" --disk "$tmp/held.img"
exec 9<&-
# mayfly run / exec / cp: mayfly's own failures are 125, the agent's 126 (like env(1)).
expect "run without a command" 125 "no command given" -- "$mayfly" run --json
expect "run with a bad flag" 125 "unknown option '--bogus'" -- "$mayfly" run --bogus -- true
expect "run with a missing rootfs" 125 "rootfs: cannot open '$tmp/nope'" -- "$mayfly" run --kernel "$good_kernel" --rootfs "$tmp/nope" -- true
expect "run with a missing --stdin file" 125 "cannot open --stdin" -- "$mayfly" run --kernel "$good_kernel" --rootfs "$tmp/held.img" --stdin "$tmp/nope" -- cat
expect "exec without --vsock" 125 "--vsock PATH is required" -- "$mayfly" exec -- true
expect "exec to a VM socket that is not there" 126 "no VM is listening" -- "$mayfly" exec --vsock "$tmp/no.sock" -- true
expect "cp to a VM socket that is not there" 126 "no VM is listening" -- "$mayfly" cp --vsock "$tmp/no.sock" "$tmp/empty" :/root/x
expect "cp with both sides local" 125 "exactly one of SRC and DST" -- "$mayfly" cp --vsock "$tmp/no.sock" a b
expect "run with a bad --max-output" 125 "bad --max-output '1X'" -- "$mayfly" run --max-output 1X -- true
# A snapshot names its kernel and root image: no default guest is looked for
# (the refusal is the snapshot's own, not "no default root image").
mkdir -p "$tmp/nosnap"
expect "run --snapshot without a default guest" 125 "cannot restore '$tmp/nosnap': no snapshot in" -- env MAYFLY_GUEST_DIR=/nonexistent "$mayfly" run --snapshot "$tmp/nosnap" -- true
mkfifo "$tmp/nosnap/state"
expect "run --snapshot whose state is a FIFO" 125 "is not a snapshot state file" -- timeout 20 env MAYFLY_GUEST_DIR=/nonexistent "$mayfly" run --snapshot "$tmp/nosnap" -- true
expect "audit without verify" 2 "usage: mayfly audit verify" -- "$mayfly" audit
expect "audit verify of a missing log" 2 "cannot read the audit log" -- "$mayfly" audit verify "$tmp/nope"
expect "audit verify with a bad --head" 2 "bad --head 'xyz'" -- "$mayfly" audit verify --head xyz "$tmp/empty"
expect "audit verify of a file that is not a log" 1 "line 1: not an audit record" -- "$mayfly" audit verify "$tmp/garbage-lines"
expect "boot --timings in a missing directory" 2 "cannot open --timings $tmp/nope/t.json" -- "$mayfly" boot --kernel "$good_kernel" --timings "$tmp/nope/t.json"
expect "bench without a kind" 2 "usage: mayfly bench boot|restore|run" -- "$mayfly" bench
expect "bench of an unknown kind" 2 "usage: mayfly bench" -- "$mayfly" bench warp
expect "bench --runs 0" 2 "bad --runs '0': must be from 1 to 100000" -- "$mayfly" bench run --runs 0
expect "bench --mode of an unknown mode" 2 "bad --mode 'random'" -- "$mayfly" bench run --mode random
expect "bench --mode burst:300" 2 "bad --mode burst:N '300'" -- "$mayfly" bench run --mode burst:300
expect "bench boot --snapshot" 2 "bench boot boots cold" -- "$mayfly" bench boot --snapshot "$tmp/dir"
expect "bench fork in bursts" 2 "bench fork forks one parent: --mode sequential only" -- "$mayfly" bench fork --mode burst:2
expect "bench run with a flag run does not take" 2 "unknown option '--tty'" -- "$mayfly" bench run --tty
expect "bench compare of one file" 2 "takes two files" -- "$mayfly" bench compare "$tmp/empty"
expect "bench compare of a missing file" 2 "cannot open $tmp/nope" -- "$mayfly" bench compare "$tmp/nope" "$tmp/nope"
expect "bench compare of a file that is not a record" 2 "garbage-lines:1: not a mayfly bench --json line" -- "$mayfly" bench compare "$tmp/garbage-lines" "$tmp/garbage-lines"
expect "bench compare of an empty file" 2 "no measured runs" -- "$mayfly" bench compare "$tmp/empty" "$tmp/empty"
expect "run --audit to a directory" 125 "cannot open the audit log" -- "$mayfly" run --audit "$tmp/dir" -- true
expect "run --audit to a FIFO" 125 "cannot open the audit log" -- "$mayfly" run --audit "$tmp/fifo" -- true
# --allow-net and --resolve: checked before any VM, one line each.
expect "run with a bad --allow-net name" 125 "bad --allow-net 'a..b'" -- "$mayfly" run --allow-net a..b -- true
expect "run with a bad --allow-net port" 125 "the port must be 1-65535" -- "$mayfly" run --allow-net pypi.org:0 -- true
expect "run with a CIDR with host bits" 125 "host bits set" -- "$mayfly" run --allow-net 10.0.0.1/8 -- true
expect "run with a bad --resolve" 125 "bad --resolve 'x.test:1.2.3'" -- "$mayfly" run --allow-net x.test --resolve x.test:1.2.3 -- true
expect "run with --resolve alone" 125 "--resolve goes with --allow-net" -- "$mayfly" run --resolve x.test:1.2.3.4 -- true
expect "boot --allow-net without --vsock" 2 "--allow-net needs --vsock" -- "$mayfly" boot --allow-net pypi.org
expect "run --approve-timeout without --approve" 125 "goes with --approve" -- "$mayfly" run --approve-timeout 5 -- true
expect "run --approve-timeout 0" 125 "bad --approve-timeout '0'" -- "$mayfly" run --approve true --approve-timeout 0 -- true
expect "mcp with a stray argument" 125 "unexpected argument 'stray'" -- "$mayfly" mcp stray
expect "pause without --out" 2 "--vsock PATH and --out DIR are required" -- "$mayfly" pause --vsock "$tmp/no.sock"
expect "fork with a stray argument" 2 "unexpected argument 'stray'" -- "$mayfly" fork --vsock "$tmp/no.sock" --out "$tmp/o" stray
expect "pause into a file" 4 "exists and is not an empty directory" -- "$mayfly" pause --vsock "$tmp/no.sock" --out "$tmp/empty"
expect "pause of no VM" 3 "no control socket '$tmp/no.sock.ctl'" -- "$mayfly" pause --vsock "$tmp/no.sock" --out "$tmp/o"
expect "fork through a FIFO as the control socket" 3 "is not a mayfly control socket" -- "$mayfly" fork --vsock "$tmp/fifo-vm" --out "$tmp/o"
[ -e "$tmp/o" ] && { echo "# a refused pause left $tmp/o behind"; failed=$((failed + 1)); }
ls -d "$tmp"/o.tmp-* > /dev/null 2>&1 && { echo "# a refused pause left a temporary directory"; failed=$((failed + 1)); }
# An interrupted pause: a control socket that takes the request and never
# answers; SIGTERM ends the wait with 128 + 15, as run does, and nothing is kept.
python3 - "$tmp/mute-vm.ctl" "$tmp/mute-took" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
c.recvmsg(4096, socket.CMSG_SPACE(16))
open(sys.argv[2], "w").close()
c.recv(1)
EOF
mute=$!
for _ in $(seq 100); do [ -S "$tmp/mute-vm.ctl" ] && break; sleep 0.1; done
# No leak check in this one process: once, LeakSanitizer's stop-the-world
# at the exit after SIGTERM spun forever (the process running, its tracer
# in wait4 on it) and the suite hung; -k ends any such case as a failure.
timeout -k 5 20 env ASAN_OPTIONS=detect_leaks=0 "$mayfly" pause --vsock "$tmp/mute-vm" --out "$tmp/mo" > /dev/null 2> "$tmp/err" &
pause=$!
for _ in $(seq 100); do [ -e "$tmp/mute-took" ] && break; sleep 0.1; done
kill -TERM "$pause"
wait "$pause"
code=$?
kill "$mute" 2> /dev/null
wait "$mute" 2> /dev/null
if [ "$code" -ne 143 ] || [ "$(wc -l < "$tmp/err")" -ne 1 ] || ! grep -q "interrupted" "$tmp/err" ||
   [ -e "$tmp/mo" ] || ls -d "$tmp"/mo.tmp-* > /dev/null 2>&1; then
	fail "exit $code (want 143)"
	tap "pause interrupted by SIGTERM"
else
	tap "pause interrupted by SIGTERM: $(cat "$tmp/err")"
fi
printf 'alice 0123456789abcdef0123\n' > "$tmp/tokens"
chmod 600 "$tmp/tokens"
expect "serve --listen without --tokens" 2 "needs --tokens" -- "$mayfly" serve --listen 127.0.0.1:8080
expect "serve --socket with --listen" 2 "exclude each other" -- "$mayfly" serve --socket "$tmp/s" --listen 127.0.0.1:1
expect "serve with a missing token file" 2 "cannot open token file" -- "$mayfly" serve --tokens "$tmp/nope"
expect "serve with an empty token file" 2 "no token" -- "$mayfly" serve --tokens "$tmp/kvm-root-only"
expect "serve --listen off loopback" 2 "only a loopback address" -- "$mayfly" serve --state "$tmp/state" --snapshot "$tmp/dir" --tokens "$tmp/tokens" --listen 0.0.0.0:8080
expect "serve --e2b without --tokens" 2 "--e2b needs --tokens" -- "$mayfly" serve --e2b 127.0.0.1:8080
expect "serve --e2b off loopback" 2 "--e2b 0.0.0.0:8080: only a loopback address" -- "$mayfly" serve --state "$tmp/state" --snapshot "$tmp/dir" --tokens "$tmp/tokens" --e2b 0.0.0.0:8080
expect "serve --e2b not an address" 2 "bad --e2b" -- "$mayfly" serve --state "$tmp/state" --snapshot "$tmp/dir" --tokens "$tmp/tokens" --e2b localhost
expect "serve --e2b-domain too long" 2 "longer than 128" -- "$mayfly" serve --tokens "$tmp/tokens" --e2b 127.0.0.1:1 --e2b-domain "$(printf '%0200d' 0)"
expect "serve --e2b-cert without --e2b-key" 2 "--e2b-cert and --e2b-key go together" -- "$mayfly" serve --tokens "$tmp/tokens" --e2b 127.0.0.1:1 --e2b-cert "$tmp/tokens"
expect "serve --e2b-cert that is no certificate" 2 "--e2b-cert $tmp/tokens:" -- "$mayfly" serve --tokens "$tmp/tokens" --e2b 127.0.0.1:1 --e2b-cert "$tmp/tokens" --e2b-key "$tmp/tokens"
expect "serve --template without NAME=" 2 "want NAME=DIR" -- "$mayfly" serve --template "$tmp/dir"
expect "serve --template default=DIR" 2 "is the default template's" -- "$mayfly" serve --template "default=$tmp/dir"
expect "serve with a template that is no snapshot" 125 "no snapshot in" -- "$mayfly" serve --state "$tmp/state" --snapshot "$tmp/dir" --socket "$tmp/nosnap.sock"
if [ -e "$tmp/nosnap.sock" ]; then
	echo "# serve left its socket after a template that is no snapshot"
	failed=$((failed + 1))
fi
expect "boot with a stray argument" 2 "unexpected argument 'stray'" -- "$mayfly" boot --kernel "$good_kernel" stray
if ls -d /tmp/mayfly-run-* > /dev/null 2>&1; then
	echo "# a /tmp/mayfly-run-* directory is left behind"
	failed=$((failed + 1))
fi
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
	expect "KVM device not permitted" 4 "no permission" -- \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$mayfly" boot \
		--kernel "$good_kernel" --kvm-device "$tmp/kvm-root-only"
else
	chmod 000 "$tmp/kvm-root-only"
	expect "KVM device not permitted" 4 "no permission" -- \
		"$mayfly" boot --kernel "$good_kernel" --kvm-device "$tmp/kvm-root-only"
fi
tap_exit
