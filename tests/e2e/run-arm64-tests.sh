#!/bin/sh
# run-arm64-tests.sh - mayfly itself on arm64 (issue 28): the aarch64 build
# (tools/cross/aarch64-linux-gnu.ini) boots an arm64 Linux Image, jailed and
# under its aarch64 seccomp filters, with an initrd made here from busybox;
# with ROOTFS, it runs commands in mayfly's arm64 guest through its agent
# (run, boot --vsock with exec and cp). Runs inside the arm64 harness
# (tools/harness/run-arm64) or on an arm64 host with KVM. Prints TAP.
#
# usage: run-arm64-tests.sh MAYFLY KERNEL [ROOTFS]
#   KERNEL   mayfly's arm64 Image (tools/build-guest --arch arm64), or any arm64
#            Image with virtio-mmio and virtio-blk built in
#   ROOTFS   mayfly's arm64 busybox root with the agent (rootfs.ext4, or
#            rootfs.ext4.gz, unpacked here)
# POSIX sh with busybox tools only. Exit status: 0 all passed, 1 a point
# failed, 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
busybox_applets timeout grep sed head tail mktemp rm cat cpio find mkdir cp chmod mount dd gunzip tr cmp kill sleep ls wc ifconfig ip nc taskset wget
[ $# -eq 2 ] || [ $# -eq 3 ] || usage "run-arm64-tests.sh MAYFLY KERNEL [ROOTFS]"
mayfly=$1
kernel=$2
rootfs=${3:-}
case_timeout=${E2E_CASE_TIMEOUT:-180}
tap_timeouts="exit"
need_mayfly
need_kvm
tap_workdir mayfly-arm64
show() { tap_tail 30 "#     " "$1"; }
tap_diag() { tap_run_diag; }

# cgroup v2, for the jail's per-VM cgroup.
[ -e /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null

# The guest: busybox, and an init that says it is up, counts its CPUs,
# reads the first line of /dev/vda when there is one, and then powers off, or
# reboots when its command line says mayfly.test=reboot.
g=$work/guest
mkdir -p "$g/bin" "$g/dev" "$g/proc"
bb=/bin/busybox
[ -f "$bb" ] || bb=$(command -v busybox)
cp "$bb" "$g/bin/busybox"
cat >"$g/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox mount -t proc proc /proc
exec >/dev/console 2>&1
/bin/busybox echo "init: up"
/bin/busybox echo "cpus: $(/bin/busybox grep -c ^processor /proc/cpuinfo)"
i=0
while [ ! -b /dev/vda ] && [ -d /sys/bus/platform/drivers/virtio-mmio ] && [ $i -lt 50 ]; do
	/bin/busybox sleep 0.1
	i=$((i + 1))
done
[ -b /dev/vda ] && /bin/busybox echo "vda: $(/bin/busybox head -n 1 /dev/vda)"
case " $(/bin/busybox cat /proc/cmdline) " in
*" mayfly.test=reboot "*) /bin/busybox echo "init: rebooting"; /bin/busybox reboot -f ;;
esac
/bin/busybox poweroff -f
INIT
chmod +x "$g/init"
(cd "$g" && find . | cpio -o -H newc 2>/dev/null) >"$work/initrd" || bail "cpio of the guest failed"
cmdline="console=ttyS0 panic=-1 rdinit=/init quiet"

cmd="boot --kernel $kernel --initrd initrd --cpus 2 --mem 256"
diag_shown=0
mf boot --kernel "$kernel" --initrd "$work/initrd" --cpus 2 --mem 256 --cmdline "$cmdline"
want_rc 0
has "$work/out" "init: up"
tap "boot: an arm64 Linux Image with an initrd, jailed and under aarch64 seccomp filters; its init's line on stdout, exit 0 after the guest's poweroff (PSCI SYSTEM_OFF)"
has "$work/out" "cpus: 2"
tap "--cpus 2: the guest brings both vCPUs up (PSCI CPU_ON on the GICv3's machine)"
if grep -qi seccomp "$work/err"; then fail "stderr names seccomp: $(grep -i seccomp "$work/err" | head -n 1)"; fi
tap "no thread of the boot met its seccomp filter (the tables resolved for aarch64)"

# A read-only disk whose first line the guest prints.
dd if=/dev/zero of="$work/disk.img" bs=1024 count=64 2>/dev/null
echo "mayfly-arm64-disk $$" | dd of="$work/disk.img" conv=notrunc 2>/dev/null
diag_shown=0
mf boot --kernel "$kernel" --initrd "$work/initrd" --mem 256 --cmdline "$cmdline" \
	--disk "$work/disk.img,ro"
want_rc 0
has "$work/out" "vda: mayfly-arm64-disk $$"
tap "--disk: a virtio-blk disk on virtio-mmio, found through the device tree with its SPI, reads back in the guest (the queue's notify by ioeventfd, its interrupt by irqfd)"

diag_shown=0
mf boot --kernel "$kernel" --initrd "$work/initrd" --mem 256 --cmdline "$cmdline mayfly.test=reboot"
want_rc 0
has "$work/out" "init: rebooting"
tap "a guest's reboot (PSCI SYSTEM_RESET) ends the VM, exit 0 as on x86"

diag_shown=0
mf boot --kernel "$work/initrd" --mem 256
want_rc 3
want_err_re "not an arm64 Image"
tap "a kernel that is no arm64 Image is refused with one line, exit 3"

# ---- the agent in mayfly's arm64 guest: run, exec, cp ---------------------------
if [ -z "$rootfs" ]; then
	tap_skip "mayfly run on arm64" "no ROOTFS given"
	tap_end
fi
case $rootfs in
*.gz) gunzip -c "$rootfs" >"$work/rootfs.ext4" || bail "cannot unpack $rootfs"; rootfs=$work/rootfs.ext4 ;;
esac
# Its own cache: the default snapshot made there is this suite's.
export MAYFLY_CACHE="$work/cache"
guest="--kernel $kernel --rootfs $rootfs"

cmd="run $guest -- sh -c 'echo hello-arm64; uname -m'"
diag_shown=0
# shellcheck disable=SC2086  # $guest is two options and their paths, no spaces
mf run $guest -- sh -c 'echo hello-arm64; uname -m'
want_rc 0
want_line hello-arm64
want_line aarch64
grep -q "making the default snapshot" "$work/err" || fail "no line says the default snapshot is being made"
[ "$(ls "$MAYFLY_CACHE/snapshots" 2>/dev/null | wc -l)" -eq 1 ] || fail "not one default snapshot in the cache: $(ls "$MAYFLY_CACHE/snapshots" 2>&1)"
tap "run: the first run of mayfly's arm64 guest boots it, saves the default snapshot (GICv3, timer, every register) and restores it; CMD run by its agent over virtio-vsock, stdout back, exit 0"
if grep -qi seccomp "$work/err"; then fail "stderr names seccomp: $(grep -i seccomp "$work/err" | head -n 1)"; fi
tap "no thread of run (the snapshot's, vsock, agent calls) met its seccomp filter"

cmd="run $guest -- sh -c 'echo again; uname -m' (restored)"
diag_shown=0
# shellcheck disable=SC2086
mf run $guest -- sh -c 'echo again; uname -m'
want_rc 0
want_line again
want_line aarch64
if grep -q "snapshot" "$work/err"; then fail "stderr speaks of a snapshot again: $(grep snapshot "$work/err" | head -n 1)"; fi
tap "run again: restored from the default snapshot, quietly, the same guest"

cmd="bench restore $guest --runs 3 --warmup 0 --json bench.json -- true"
diag_shown=0
# shellcheck disable=SC2086
mf bench restore $guest --runs 3 --warmup 0 --json "$work/bench.json" -- true
want_rc 0
[ "$(grep -c '"type":"run"' "$work/bench.json")" -eq 3 ] || fail "not 3 run lines in the record"
grep -q '"at_ms":{"main":[0-9].*"first_kvm_run":[0-9].*"exit":[0-9]' "$work/bench.json" || fail "a run's record lacks its points"
grep -q '"machine":"aarch64"' "$work/bench.json" || fail "the host record does not say aarch64"
grep -q '^exit  *3 ' "$work/out" || fail "the table has no exit row over 3 runs"
tap "bench restore --runs 3 on arm64: every run's points from exec to exit in the record, the host aarch64, the table"

# snapshot create with a --setup command and two vCPUs, then run --snapshot.
snap=$work/snap2
cmd="snapshot create $guest --cpus 2 --setup 'echo from-setup >/root/s' --out snap2"
diag_shown=0
# shellcheck disable=SC2086
mf snapshot create $guest --cpus 2 --setup 'echo from-setup >/root/s' --out "$snap"
want_rc 0
cmd="run --snapshot snap2 -- sh -c 'cat /root/s; grep -c ^processor /proc/cpuinfo; ...'"
# shellcheck disable=SC2016  # expanded in the guest
mf run --snapshot "$snap" -- sh -c 'cat /root/s; grep -c ^processor /proc/cpuinfo; for c in 0 1; do taskset -c $c true && echo "cpu$c runs"; done'
want_rc 0
want_line from-setup
want_line 2
want_line "cpu0 runs"
want_line "cpu1 runs"
tap "snapshot create --setup --cpus 2, then run --snapshot: the setup's file is there and both vCPUs run (the second's power state and registers restored)"

printf 'arm64 put %s\n' "$$" >"$work/in.txt"
rm -f "$work/got.txt"
cmd="run $guest --put in.txt:/root/in.txt --get /root/up.txt:got.txt -- sh -c 'tr a-z A-Z </root/in.txt >/root/up.txt; echo oops >&2; exit 7'"
diag_shown=0
# shellcheck disable=SC2086
mf run $guest --put "$work/in.txt:/root/in.txt" --get "/root/up.txt:$work/got.txt" -- \
	sh -c 'tr a-z A-Z </root/in.txt >/root/up.txt; echo oops >&2; exit 7'
want_rc 7
grep -qx oops "$work/err" || fail "stderr lacks the command's line \"oops\""
[ "$(cat "$work/got.txt" 2>/dev/null)" = "ARM64 PUT $$" ] || fail "--get brought back \"$(cat "$work/got.txt" 2>/dev/null)\""
tap "run --put/--get: a file in, the command's own file out, its stderr and its exit code 7 back"

# One VM, several calls.
sock=$work/vm.sock
cmd="boot $guest --vsock vm.sock (in the background)"
# shellcheck disable=SC2086
"$mayfly" boot $guest --vsock "$sock" </dev/null >"$work/boot.out" 2>"$work/boot.err" &
vm=$!
tap_cleanup() { [ -z "${vm:-}" ] || kill -KILL "$vm" 2>/dev/null; }
vsock_vm_points "$vm" "$sock"

# ---- mcp: a scripted client's session ----------------------------------------
cat >"$work/mcp.in" <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"scripted","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo scripted; uname -m"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/s.txt","content":"kept\n"}}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/s.txt"}}}
JSON
cmd="mcp $guest < mcp.in (initialize, run_command, write_file, read_file)"
# shellcheck disable=SC2086
timeout -k 5 "$case_timeout" "$mayfly" mcp $guest <"$work/mcp.in" >"$work/out" 2>"$work/err"
rc=$?
want_rc 0
has "$work/out" '"id":1,"result":{"protocolVersion":"2025-06-18"'
has "$work/out" '"stdout":"scripted\naarch64\n"'
has "$work/out" '"content":"kept\n"'
[ "$(wc -l <"$work/out")" -eq 4 ] || fail "$(wc -l <"$work/out") answers, want 4"
tap "mcp: a scripted session in an arm64 VM (lifecycle, run_command, write_file, read_file)"

# ---- --allow-net: the guest's busybox wget through the agent's proxy -------------
ifconfig lo 127.0.0.1 up 2>/dev/null || ip link set lo up 2>/dev/null
mkdir -p "$work/www"
echo "arm64 net $$" >"$work/www/plain"
busybox httpd -f -p 127.0.0.1:8080 -h "$work/www" &
httpd=$!
tap_cleanup() {
	[ -z "${vm:-}" ] || kill -KILL "$vm" 2>/dev/null
	kill "$httpd" 2>/dev/null
}
allow="--allow-net files.test:8080 --allow-net 127.0.0.1 --resolve files.test:127.0.0.1"
cmd="run $guest $allow -- wget -q -O- http://files.test:8080/plain"
diag_shown=0
# shellcheck disable=SC2086
mf run $guest $allow -- wget -q -O- http://files.test:8080/plain
want_rc 0
want_line "arm64 net $$"
tap "run --allow-net: the guest reaches an allowed loopback server of the host through its agent's proxy"

cmd="run $guest --allow-net files.test:8080 --resolve files.test:127.0.0.1 -- wget -q -O- http://other.test:8080/plain"
# shellcheck disable=SC2086
mf run $guest --allow-net files.test:8080 --resolve files.test:127.0.0.1 -- wget -q -O- http://other.test:8080/plain
[ "$rc" -ne 0 ] || fail "exit 0: a host no rule names was reached"
grep -q "arm64 net" "$work/out" && fail "the page came back"
grep -q "other.test port 8080 is not allowed by any --allow-net rule" "$work/out" "$work/err" ||
	fail "no line names other.test:8080 as not allowed"
tap "run --allow-net: a host no rule names is not reached"
kill "$httpd" 2>/dev/null

# ---- serve: sandboxes over HTTP (busybox nc as the client) ------------------------
tok="arm64-token-$$-0123456789abcdef"
printf 'alice %s\n' "$tok" >"$work/tokens"
chmod 600 "$work/tokens"
port=18080
# http METHOD PATH [BODY]: one request to the service, its answer's body in
# $work/out and status line in $work/status. A POST goes through busybox wget
# (an exec's answer streams, chunked); the others through nc, whose
# half-close after the request only a streamed answer would mind.
http() {
	if [ "$1" = POST ]; then
		timeout -k 5 "$case_timeout" wget -S -O "$work/out" --header "Authorization: Bearer $tok" \
			--header 'Content-Type: application/json' --post-data "$3" \
			"http://127.0.0.1:$port$2" 2>"$work/err"
		grep -m 1 'HTTP/1' "$work/err" | tr -d '\r' >"$work/status"
		return
	fi
	printf '%s %s HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n' "$1" "$2" "$tok" |
		timeout -k 5 "$case_timeout" nc 127.0.0.1 "$port" >"$work/http" 2>"$work/err"
	tr -d '\r' <"$work/http" | head -n 1 >"$work/status"
	tr -d '\r' <"$work/http" | sed '1,/^$/d' >"$work/out"
}
cmd="serve $guest --tokens tokens --listen 127.0.0.1:$port --state serve --ephemeral"
# shellcheck disable=SC2086
"$mayfly" serve $guest --tokens "$work/tokens" --listen "127.0.0.1:$port" --state "$work/serve" \
	--ephemeral </dev/null >"$work/serve.out" 2>"$work/serve.err" &
serve=$!
tap_cleanup() {
	[ -z "${vm:-}" ] || kill -KILL "$vm" 2>/dev/null
	[ -z "${serve:-}" ] || kill -KILL "$serve" 2>/dev/null
}
i=0
until grep -q "127.0.0.1:$port" "$work/serve.err" 2>/dev/null || [ $i -ge 600 ]; do
	kill -0 "$serve" 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
http POST /sandboxes '{"ttl":120}'
id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$work/out")
[ -n "$id" ] || fail "no sandbox id in the create's answer: $(cat "$work/status" "$work/out" "$work/serve.err" | tail -n 3)"
http POST "/sandboxes/$id/exec" '{"argv":["sh","-c","echo served; uname -m"]}'
# The stdout events' data, joined (the output may come in one event or more).
got=$(sed -n 's/^{"event":"stdout","data":"\(.*\)"}$/\1/p' "$work/out" | tr -d '\n')
[ "$got" = 'served\naarch64\n' ] || fail "the exec's stdout events carry \"$got\""
has "$work/out" '"event":"exit","code":0'
tap "serve: a sandbox created over HTTP on arm64 (restored from the default snapshot) runs an exec, its output streamed back"

http DELETE "/sandboxes/$id"
grep -q " 20[04] " "$work/status" || fail "the delete answered $(cat "$work/status")"
http GET "/sandboxes/$id"
grep -q " 404 " "$work/status" || fail "the deleted sandbox still answers: $(cat "$work/status")"
kill -TERM "$serve" 2>/dev/null
wait "$serve"
rc=$?
serve=""
want_rc 0
tap "serve: the sandbox deleted, the service ends on SIGTERM with exit 0"

tap_end
