#!/bin/sh
# run-containerd-tests.sh - containerd runs containers in mayfly microVMs through
# containerd-shim-mayfly-v2 (issue 25): a real containerd 1.6 with its own config,
# root and sockets under a temporary directory, images imported from archives made
# by make-ctr-images (no registry), and ctr as the client. Points: ctr run --rm
# prints and exits with the container's code; the overlayfs and native
# snapshotters; an ordinary Debian image; stdin piped; -t on a terminal; ctr
# task exec; ctr task kill (TERM, KILL: 137); ctr task pause/resume; ctr task ls and
# ps; ctr events in containerd's order; several containers at once; a pod's
# containers in one VM (the CRI annotations); a shim killed
# with SIGKILL, then ctr task delete cleans up; containerd restarted mid-run and
# the task still answers; bad requests (an image without the program, a bundle
# without its root, a malformed rule) get a clear error; nothing left behind (VM
# processes, mounts, the shim's directories).
#
# usage: run-containerd-tests.sh SHIM GUESTDIR TOOLDIR
#   SHIM     containerd-shim-mayfly-v2
#   GUESTDIR the default guest (vmlinux, initramfs.cpio.gz)
#   TOOLDIR  containerd, ctr, mke2fs, ptyrun, mfbox.tar, mfnoprog.tar, mfmusl.tar, mfdebian.tar (e2e-suite
#            stages them)
#
# Needs root and a /dev/kvm that runs Linux (the nested harness's L1, or a real
# host). POSIX sh with busybox tools only. Exit: 0 all passed, 1 a point failed,
# 2 usage, 3 could not run.

set -u

# shellcheck source-path=SCRIPTDIR source=tap.sh
. "$(dirname "$0")/tap.sh"
# shellcheck source-path=SCRIPTDIR source=containerd-lib.sh
. "$(dirname "$0")/containerd-lib.sh"
busybox_applets timeout grep sed head tail tr wc mktemp sleep rm cat ls cut id awk \
	mkdir ps kill sort uniq find mount
[ $# -eq 3 ] || usage "run-containerd-tests.sh SHIM GUESTDIR TOOLDIR"
shim=$1
guestdir=$2
tools=$3
case_timeout=${E2E_CASE_TIMEOUT:-180}

[ -x "$shim" ] || bail "$shim is not executable"
need_kvm e2e-agent
[ "$(id -u)" = 0 ] || bail "containerd and its shims run as root"
need_guest "$guestdir" vmlinux initramfs.cpio.gz
for t in containerd ctr mke2fs ptyrun mfbox.tar mfnoprog.tar mfmusl.tar mfdebian.tar; do
	[ -e "$tools/$t" ] || bail "$tools/$t is missing (e2e-suite stages it)"
done
tap_workdir ctr-tests
# The shim, containerd, ctr and mke2fs on PATH; the shim finds its guest here.
mkdir -p "$work/bin"
cp "$shim" "$work/bin/containerd-shim-mayfly-v2"
for t in containerd ctr mke2fs ptyrun; do ln -s "$(cd "$tools" && pwd)/$t" "$work/bin/$t"; done
PATH=$work/bin:$PATH
export PATH
MAYFLY_GUEST_DIR=$(cd "$guestdir" && pwd)
MAYFLY_CACHE=$work/cache
export MAYFLY_GUEST_DIR MAYFLY_CACHE
sock=$work/c.sock   # containerd_start's containerd_sock
tap_cleanup() {
	ctr_q task ls -q 2>/dev/null | while read -r t; do
		ctr_q task kill -s KILL "$t" >/dev/null 2>&1
		ctr_q task delete "$t" >/dev/null 2>&1
	done
	containerd_stop
	sleep 1
	for p in $(ps -o pid,args | awk '$2 ~ /containerd-shim-mayfly-v2$/ { print $1 }'); do
		kill -9 "$p" 2>/dev/null
	done
	grep " $work/" /proc/mounts | cut -d' ' -f2 | sort -r | while read -r m; do umount -l "$m"; done
}

tap_why=diag
tap_diag() {
	echo "# $why"
	tap_tail -n 10 "#   " "$work/err" "$work/out"
	tap_tail -n 15 "#   containerd: " "$work/containerd.log"
}

# start_containerd: ours (containerd-lib.sh), on $work; bails if it never answers.
start_containerd() {
	containerd_start "$work" || bail "containerd did not answer within 30 s"
}

# ctr_q ARGS...: ctr on our containerd.
ctr_q() {
	ctr -a "$sock" "$@"
}

# c ARGS...: ctr ARGS bounded by $case_timeout, stdin /dev/null; $work/out,
# $work/err, $rc.
c() {
	timeout -k 5 "$case_timeout" ctr -a "$sock" "$@" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
}

run_flags="--snapshotter native --runtime io.containerd.mayfly.v2"
img=docker.io/library/mfbox:1

# task_status ID: the task's status in ctr task ls (RUNNING, STOPPED, PAUSED).
task_status() {
	ctr_q task ls 2>/dev/null | awk -v id="$1" '$1 == id { print $3 }'
}

# wait_status ID STATUS: until ctr task ls says so (30 s at most).
wait_status() {
	i=0
	while [ "$(task_status "$1")" != "$2" ] && [ $i -lt 100 ]; do
		sleep 0.3
		i=$((i + 1))
	done
	[ "$(task_status "$1")" = "$2" ]
}

# vm_procs: how many VM processes of ours run (`containerd-shim-mayfly-v2 vm`).
vm_procs() {
	ps -o args 2>/dev/null | grep -c '^[^ ]*containerd-shim-mayfly-v2 vm ' || true
}

start_containerd
c image import --snapshotter native "$tools/mfbox.tar"
[ "$rc" = 0 ] || bail "ctr image import failed: $(cat "$work/err")"
c image import --snapshotter native "$tools/mfnoprog.tar"
[ "$rc" = 0 ] || bail "ctr image import of mfnoprog failed: $(cat "$work/err")"
ctr_q events >"$work/events" 2>&1 &
events_pid=$!

# ---- run, exit codes, stdin, a terminal -------------------------------------

# shellcheck disable=SC2086 # run_flags: words
c run --rm $run_flags "$img" r1 sh -c 'echo hello from $(hostname); cat /data/hello; id -u'
want_rc 0
grep -qx 'hello from r1' "$work/out" || fail "no 'hello from r1' in the output"
grep -qx 'hello from the image' "$work/out" || fail "the image's /data/hello is not in the VM"
tap "ctr run --rm: the container's output comes back, its hostname and image files are there"

# shellcheck disable=SC2086
c run --rm $run_flags "$img" r2 sh -c 'echo out; echo err >&2; exit 7'
want_rc 7
grep -qx out "$work/out" || fail "stdout lost"
grep -qx err "$work/err" || fail "stderr lost"
tap "the container's exit code (7) is ctr run's, stdout and stderr apart"

# containerd's default snapshotter, overlayfs: the shim mounts the layers it is
# given and images the merged tree, once for the image (keyed by its layers).
images() {
	find "$MAYFLY_CACHE/shim-images" -name '*.ext4' 2>/dev/null | wc -l
}
c image import --snapshotter overlayfs "$tools/mfbox.tar"
if [ "$rc" != 0 ]; then
	fail "ctr image import into overlayfs failed: $(head -c 300 "$work/err")"
else
	before=$(images)
	c run --rm --snapshotter overlayfs --runtime io.containerd.mayfly.v2 "$img" o1 \
		sh -c 'echo overlay: $(cat /data/hello)'
	want_rc 0
	grep -qx 'overlay: hello from the image' "$work/out" ||
		fail "o1 on overlayfs: $(head -c 200 "$work/out")"
	c run --rm --snapshotter overlayfs --runtime io.containerd.mayfly.v2 "$img" o2 true
	want_rc 0
	[ "$(images)" = $((before + 1)) ] ||
		fail "two overlayfs containers of one image built $(($(images) - before)) root images, not 1"
fi
tap "the overlayfs snapshotter (containerd's default): the image's layers, imaged once for two containers"

# An ordinary distribution image, not one made for us: Debian 12 as mmdebstrap
# lays it out (make-ctr-images --debian): /bin a symlink into /usr, programs
# through glibc's dynamic loader, device nodes and absolute symlinks in the
# layer, the image's own PATH. mayfly's init and agent still come from mayfly.
c image import --snapshotter overlayfs "$tools/mfdebian.tar"
if [ "$rc" != 0 ]; then
	fail "ctr image import of mfdebian failed: $(head -c 300 "$work/err")"
else
	c run --rm --snapshotter overlayfs --runtime io.containerd.mayfly.v2 \
		docker.io/library/mfdebian:1 d1 bash -c 'cat /etc/debian_version; readlink /bin
		python3 -c "import hashlib, sys; print(sys.implementation.name, hashlib.sha256(b\"mayfly\").hexdigest()[:16])"
		id -un; exit 3'
	want_rc 3
	grep -q '^12\.' "$work/out" || fail "no Debian 12 /etc/debian_version: $(head -c 200 "$work/out")"
	grep -qx usr/bin "$work/out" || fail "/bin is not the image's symlink to usr/bin"
	grep -qx 'cpython ba78b155af9c778d' "$work/out" ||
		fail "the image's python3 did not run: $(head -c 300 "$work/out"; head -c 300 "$work/err")"
	grep -qx root "$work/out" || fail "id -un is not root from the image's /etc/passwd"
fi
tap "an ordinary Debian 12 image (merged /usr, dynamic glibc, python3): its own programs run, exit 3 is ctr's"

# An image shaped as Alpine's (make-ctr-images): musl's dynamic loader and
# libc at /lib/ld-musl-x86_64.so.1, no glibc and no shell; its program reads
# the image's /etc/passwd through musl.
c image import --snapshotter overlayfs "$tools/mfmusl.tar"
if [ "$rc" != 0 ]; then
	fail "ctr image import of mfmusl failed: $(head -c 300 "$work/err")"
else
	c run --rm --snapshotter overlayfs --runtime io.containerd.mayfly.v2 \
		docker.io/library/mfmusl:1 m1 /usr/bin/mfhello 5
	want_rc 5
	[ "$(sed -n 1p "$work/out")" = musl ] ||
		fail "mfhello did not run on musl: $(head -c 200 "$work/out"; head -c 300 "$work/err")"
	[ "$(sed -n 2p "$work/out")" = root ] || fail "musl's getpwuid did not read the image's /etc/passwd"
fi
tap "a musl image shaped as Alpine's (its own loader and libc, no glibc, no shell): its program runs, exit 5 is ctr's"

# shellcheck disable=SC2086
c run --rm $run_flags --memory-limit 209715200 --cpus 2 "$img" r5 \
	sh -c 'grep MemTotal /proc/meminfo; grep -c ^processor /proc/cpuinfo'
want_rc 0
kb=$(awk '/MemTotal/ { print $2 }' "$work/out")
[ -n "$kb" ] && [ "$kb" -gt 150000 ] && [ "$kb" -le 204800 ] ||
	fail "MemTotal ${kb:-?} kB, want a VM of 200 MiB"
grep -qx 2 "$work/out" || fail "not 2 vCPUs for --cpus 2: $(tail -n 1 "$work/out")"
tap "linux.resources: --memory-limit 200 MiB is the VM's memory (${kb:-?} kB), --cpus 2 its vCPUs"

printf 'piped line\nsecond\n' >"$work/in"
# shellcheck disable=SC2086
timeout -k 5 "$case_timeout" ctr -a "$sock" run --rm $run_flags "$img" r3 sh -c 'wc -l; echo end' \
	<"$work/in" >"$work/out" 2>"$work/err"
rc=$?
want_rc 0
grep -qx '2' "$work/out" || fail "wc saw not 2 lines of stdin: $(head -c 200 "$work/out")"
grep -qx end "$work/out" || fail "the command did not go on after stdin's end"
tap "stdin piped into ctr run reaches the container, and its end is an end (wc -l: 2)"

# shellcheck disable=SC2086
timeout -k 5 "$case_timeout" ptyrun -s 33x101 -t "$case_timeout" -- ctr -a "$sock" run --rm -t \
	$run_flags "$img" r4 sh -c 'tty; stty size; echo tty-done' >"$work/out" 2>"$work/err"
rc=$?
want_rc 0
grep -q '^/dev/pts/' "$work/out" || fail "the process has no terminal: $(head -c 200 "$work/out")"
grep -q '^33 101' "$work/out" || fail "the terminal's size is not ctr's 33x101"
tap "ctr run -t: the process runs on a terminal of ctr's size (33x101)"

# ---- a long-running container: exec, ps, pause, kill -----------------------

# shellcheck disable=SC2086
c run -d $run_flags "$img" d1 sh -c 'echo started >/tmp/mark; exec sleep 1000'
want_rc 0
wait_status d1 RUNNING || fail "d1 is not RUNNING: $(ctr_q task ls 2>&1 | tail -n 3)"
tap "ctr run -d: the task is RUNNING in ctr task ls"

c task exec --exec-id e1 d1 sh -c 'cat /tmp/mark; echo exec-$((6*7))'
want_rc 0
grep -qx started "$work/out" || fail "the exec does not see the container's /tmp/mark"
grep -qx exec-42 "$work/out" || fail "no exec-42"
c task exec --exec-id e2 d1 sh -c 'exit 5'
want_rc 5
tap "ctr task exec runs in the same VM and root, with its own exit code (5)"

c task ps d1
want_rc 0
[ "$(grep -c '^[0-9]' "$work/out")" -ge 1 ] || fail "ctr task ps lists no process"
tap "ctr task ps lists the task's processes"

c task pause d1
want_rc 0
[ "$(task_status d1)" = PAUSED ] || fail "d1 is $(task_status d1), not PAUSED"
c task resume d1
want_rc 0
[ "$(task_status d1)" = RUNNING ] || fail "d1 is $(task_status d1) after resume"
c task exec --exec-id e3 d1 true
want_rc 0
tap "ctr task pause and resume: PAUSED, then RUNNING, and it still runs execs"

c task kill -s TERM d1
wait_status d1 STOPPED || fail "d1 did not stop after SIGTERM: $(task_status d1)"
c task delete d1
want_rc 0
grep -q 'd1' "$work/out" || true
c container delete d1
tap "ctr task kill -s TERM stops the task; ctr task delete removes it"

# shellcheck disable=SC2086
ctr -a "$sock" run --rm $run_flags "$img" k1 sleep 1000 </dev/null >"$work/k1.out" 2>&1 &
k1=$!
wait_status k1 RUNNING || fail "k1 never ran"
c task kill -s KILL k1
wait "$k1"
rc=$?
want_rc 137
tap "ctr task kill -s KILL: ctr run --rm exits 137 (128 + SIGKILL)"

# ---- several at once ---------------------------------------------------------

n_at_once=${E2E_AT_ONCE:-10}
echo "# $n_at_once containers at once"
i=0
while [ $i -lt "$n_at_once" ]; do
	# shellcheck disable=SC2086
	{ timeout -k 5 "$case_timeout" ctr -a "$sock" run --rm $run_flags "$img" "m$i" \
		sh -c "echo m$i" </dev/null >"$work/m$i.out" 2>"$work/m$i.err"
	  echo $? >"$work/m$i.rc"; } &
	at_once_pids="${at_once_pids:-} $!"
	i=$((i + 1))
done
# A line each time one ends, and L1's free memory: these run side by side.
t=0
done_n=0
while [ "$done_n" -lt "$n_at_once" ] && [ $t -lt $((case_timeout + 10)) ]; do
	sleep 1
	t=$((t + 1))
	now=$(find "$work" -maxdepth 1 -name 'm*.rc' | wc -l)
	if [ "$now" != "$done_n" ] || [ $((t % 30)) = 0 ]; then
		done_n=$now
		echo "# ${t} s: $done_n of $n_at_once ended, $(vm_procs) VMs running," \
			"$(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo) MiB available"
	fi
done
# shellcheck disable=SC2086
wait $at_once_pids   # not a bare wait: ctr events runs in the background too
bad=""
i=0
while [ $i -lt "$n_at_once" ]; do
	grep -qx "m$i" "$work/m$i.out" ||
		bad="$bad m$i(rc $(cat "$work/m$i.rc" 2>/dev/null) $(head -c 80 "$work/m$i.err"))"
	i=$((i + 1))
done
[ -z "$bad" ] || fail "containers without their output:$bad"
tap "$n_at_once containers at once, each with its own output"

# ---- a pod: its containers in one VM ------------------------------------------

# The annotations containerd's CRI plugin sets (ctr cannot make a pod): the
# sandbox container first, then the pod's other containers.
sandbox_of() {
	echo "--annotation io.kubernetes.cri.sandbox-id=$1 --annotation io.kubernetes.cri.container-type=$2"
}
# shellcheck disable=SC2086,SC2046
c run -d $run_flags $(sandbox_of pod1 sandbox) "$img" pod1 sleep 1001
wait_status pod1 RUNNING || fail "pod1's sandbox never ran: $(head -c 300 "$work/err")"
vms=$(vm_procs)
# shellcheck disable=SC2086,SC2046
c run -d $run_flags $(sandbox_of pod1 container) "$img" pod1-a sh -c 'echo mine >/tmp/a; exec sleep 1000'
wait_status pod1-a RUNNING || fail "pod1-a never ran: $(head -c 300 "$work/err")"
[ "$(vm_procs)" = "$vms" ] || fail "pod1-a has a VM of its own ($vms VM processes, then $(vm_procs))"
# One kernel: pod1-a sees the sandbox's process; its own root: pod1 does not see
# pod1-a's file.
c task exec --exec-id see pod1-a ps
grep -q 'sleep 1001' "$work/out" || fail "pod1-a does not see its pod's sandbox process: $(head -c 300 "$work/out")"
c task exec --exec-id own pod1-a cat /tmp/a
grep -qx mine "$work/out" || fail "pod1-a's exec does not run in its root"
c task exec --exec-id other pod1 cat /tmp/a
[ "$rc" != 0 ] || fail "the sandbox sees pod1-a's file: the roots are not apart"
# shellcheck disable=SC2086,SC2046
c run --rm $run_flags $(sandbox_of pod1 container) "$img" pod1-b sh -c 'echo b-ran; exit 3'
[ "$rc" = 3 ] && grep -qx b-ran "$work/out" || fail "pod1-b: rc $rc, out $(head -c 200 "$work/out")"
c task kill -s KILL pod1-a
wait_status pod1-a STOPPED || fail "pod1-a did not stop"
c task delete pod1-a
c container delete pod1-a
[ "$(task_status pod1)" = RUNNING ] || fail "the sandbox stopped with its member: $(task_status pod1)"
c task exec --exec-id after pod1 true
[ "$rc" = 0 ] || fail "the pod's VM no longer runs execs after a member's delete"
c task kill -s KILL pod1
wait_status pod1 STOPPED
c task delete pod1
c container delete pod1
[ "$(vm_procs)" = 0 ] || fail "$(vm_procs) VM processes left by the pod"
tap "a pod: containers with its sandbox's CRI annotations run in its VM, each in its own root"

# The sandbox ends first (its VM with it): the member's process ends too, and
# both delete cleanly in either order.
# shellcheck disable=SC2086,SC2046
c run -d $run_flags $(sandbox_of pod2 sandbox) "$img" pod2 sleep 1000
wait_status pod2 RUNNING || fail "pod2's sandbox never ran"
# shellcheck disable=SC2086,SC2046
c run -d $run_flags $(sandbox_of pod2 container) "$img" pod2-a sleep 1000
wait_status pod2-a RUNNING || fail "pod2-a never ran: $(head -c 300 "$work/err")"
c task kill -s KILL pod2
wait_status pod2 STOPPED || fail "pod2 did not stop"
wait_status pod2-a STOPPED || fail "pod2-a runs on without its pod's VM: $(task_status pod2-a)"
c task delete pod2
c task delete pod2-a
[ "$rc" = 0 ] || fail "pod2-a's delete after its sandbox's: $(head -c 200 "$work/err")"
c container delete pod2
c container delete pod2-a
[ "$(vm_procs)" = 0 ] || fail "$(vm_procs) VM processes left by pod2"
tap "a pod whose sandbox ends first: its member ends with it; both delete cleanly"

# ---- bad requests --------------------------------------------------------------

# shellcheck disable=SC2086
c run --rm $run_flags docker.io/library/mfnoprog:1 b1
[ "$rc" != 0 ] || fail "an image without its program ran"
grep -qi 'no-such-program\|not found\|no such file' "$work/err" ||
	fail "the error does not say the program is missing: $(head -c 300 "$work/err")"
tap "an image whose program does not exist: ctr run fails and says why"

# A bundle without a root file system (ctr run --rootfs names a directory
# that is not there: no mounts, a root.path that does not exist).
c run --rm --runtime io.containerd.mayfly.v2 --rootfs "$work/no-such-root" b2 true
[ "$rc" != 0 ] || fail "a container without a root ran"
grep -q "cannot open the rootfs '$work/no-such-root'" "$work/err" ||
	fail "the error does not name the missing root: $(head -c 300 "$work/err")"
# A config.json the shim refuses: an io.mayfly.allow-net rule that is not one.
# shellcheck disable=SC2086
c run --rm $run_flags --annotation 'io.mayfly.allow-net=exa mple.com:99999' "$img" b3 true
[ "$rc" != 0 ] || fail "a container with a malformed io.mayfly.allow-net ran"
grep -q 'io.mayfly.allow-net: ' "$work/err" ||
	fail "the error does not name the annotation: $(head -c 300 "$work/err")"
[ "$(vm_procs)" = 0 ] || fail "$(vm_procs) VM processes left by the refused bundles"
tap "a bundle without its root, a config.json with a malformed rule: ctr fails, saying which"

# ---- a shim killed, containerd restarted ---------------------------------------

# shellcheck disable=SC2086
c run -d $run_flags "$img" s1 sleep 1000
wait_status s1 RUNNING || fail "s1 never ran"
spid=$(ps -o pid,args | awk '$2 ~ /containerd-shim-mayfly-v2$/ && $3 != "vm" && / -id s1( |$)/ {
	print $1; exit }')
[ -n "$spid" ] || fail "no shim process for s1"
kill -9 "$spid" 2>/dev/null
sleep 2
c task delete s1
c container delete s1
[ "$(vm_procs)" = 0 ] || fail "$(vm_procs) VM processes left after the shim was killed"
grep -q " $work/state/.*/s1/rootfs " /proc/mounts && fail "s1's rootfs is still mounted"
tap "a shim killed with SIGKILL: ctr task delete cleans up (no VM, no mount)"

# shellcheck disable=SC2086
c run -d $run_flags "$img" s2 sh -c 'echo before >/tmp/f; exec sleep 1000'
wait_status s2 RUNNING || fail "s2 never ran"
containerd_stop
start_containerd
wait_status s2 RUNNING || fail "after containerd's restart s2 is $(task_status s2)"
c task exec --exec-id after-restart s2 cat /tmp/f
want_rc 0
grep -qx before "$work/out" || fail "the exec after the restart does not see the task's file"
c task kill -s KILL s2
wait_status s2 STOPPED
c task delete s2
c container delete s2
tap "containerd restarted mid-run: the shim survives, the task still answers"

# ---- events, and nothing left behind -----------------------------------------

kill "$events_pid" 2>/dev/null
# r1's own events, in order.
topics=$(grep -E '/tasks/' "$work/events" | grep -w r1 | sed 's|.*\(/tasks/[a-z-]*\).*|\1|' | uniq |
	tr '\n' ' ')
case $topics in
"/tasks/create /tasks/start /tasks/exit /tasks/delete ") ;;
*) fail "r1's events: '$topics'" ;;
esac
tap "ctr events: TaskCreate, TaskStart, TaskExit, TaskDelete, in that order"

sleep 1
[ "$(vm_procs)" = 0 ] || fail "$(vm_procs) VM processes left"
[ -z "$(ls /run/mayfly-shim 2>/dev/null)" ] || fail "the shim left $(ls /run/mayfly-shim)"
grep -q " $work/state/" /proc/mounts && fail "mounts left: $(grep " $work/state/" /proc/mounts)"
tap "nothing left behind: no VM process, no mount, no VM directory"

tap_end
