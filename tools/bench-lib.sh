# shellcheck shell=bash
# bench-lib.sh - the harness of every tools/bench-* script, sourced by each: the
# release build, the guest, the payload directory, where the benchmark runs (this
# host's /dev/kvm or the nested harness) and its raw result lines. A benchmark only
# says what to put in the payload, writes the payload's bench.sh and reads its
# results.
#
#   . "$(dirname "$0")/bench-lib.sh"
#   bench_init NAME DEFAULT_RUNS "$@"   cd to the tree; $runs from the one argument
#   bench_number NAME VALUE MIN [MAX]   a number setting checked (else exit 2)
#   bench_build [--guest]       install-deps, build-release; --guest: the guest too
#   bench_payload FILE...       $payload: a temporary dir (removed on exit) with FILEs
#                               and bench-payload.sh (rc, fail: for bench.sh)
#   bench_static NAME SRC       a static program in the payload (goes into guests)
#   bench_initrd PROG...        $payload/initrd.img: the guest's initramfs + /bin/PROG
#   bench_run [--with-qemu] [--timeout SEC] [--data DIR]
#                               run $payload/bench.sh; its lines in $payload/results
#
# Variables set: bench_name, runs, build (build-release), guest (with --guest),
# bench_kernel (the guest kernel's file name there: vmlinux, or Image on arm64),
# payload, where (a phrase for the tables), bench_note (for the tables: what
# numbers from the nested harness mean; empty elsewhere), bench_rc (bench.sh's
# or the harness's exit status). Raw lines of the run go to stderr; the
# benchmark's table to stdout.
#
# BENCH_ARCH=arm64 (issue 28), for a benchmark that sets bench_arm64=1 before
# bench_init: mayfly and its guest for arm64 (build-arm64-release, cross-built
# on another host; tools/build-guest --arch arm64), run on an arm64 host's
# /dev/kvm or in the arm64 harness (tools/harness/run-arm64).

set -euo pipefail

# bench_init NAME DEFAULT_RUNS [RUNS]: the benchmark's name for messages, and $runs
# (the benchmarks' only argument).
bench_init() {
	bench_name=$1
	runs=${3:-$2}
	[ $# -le 3 ] || bench_die "usage: tools/$bench_name [RUNS]" 2
	cd "$(dirname "${BASH_SOURCE[0]}")/.."
	bench_number RUNS "$runs" 1
	build="build-release"
	bench_kernel=vmlinux
	bench_cross=()
	case ${BENCH_ARCH:-} in
	'' | x86_64) ;;
	arm64 | aarch64)
		[ "${bench_arm64:-0}" = 1 ] || bench_die "BENCH_ARCH=arm64: $bench_name runs on x86-64 only so far" 2
		# shellcheck disable=SC2034  # bench_kernel: for the benchmarks' payloads
		BENCH_ARCH=arm64 bench_kernel=Image build="build-arm64-release"
		# No Criterion for arm64 here: the cross build has no unit tests (docs/arm64.md).
		[ "$(uname -m)" = aarch64 ] ||
			bench_cross=(--cross-file tools/cross/aarch64-linux-gnu.ini -Dtests=false)
		;;
	*) bench_die "BENCH_ARCH must be x86_64 or arm64" 2 ;;
	esac
}

# bench_number NAME VALUE MIN [MAX]: VALUE (the setting NAME) is a whole number
# from MIN to MAX; else "NAME must be MIN-MAX" (without MAX: "NAME must be a
# positive number"), exit 2.
bench_number() {
	local name=$1 value=$2 min=$3 max=${4:-}
	[[ $value =~ ^[0-9]+$ && $value -ge $min && ( -z $max || $value -le $max ) ]] && return
	[[ -z $max ]] || bench_die "$name must be $min-$max" 2
	bench_die "$name must be a positive number" 2
}

bench_say() { echo "$bench_name: $*" >&2; }

# bench_die MESSAGE [STATUS]: one line on stderr, exit STATUS (default 1).
bench_die() {
	bench_say "$1"
	exit "${2:-1}"
}

# bench_build [--guest]: the release build of mayfly and the tools in build-release/
# (static like an installed mayfly); with --guest also the default guest kernel and
# rootfs (tools/build-guest, cached), whose directory goes into $guest.
# shellcheck disable=SC2120  # its one option is optional
bench_build() {
	local with_guest=0
	[ "${1:-}" = --guest ] && with_guest=1
	if [ "$with_guest" = 1 ]; then tools/install-deps --with-kernel; else tools/install-deps; fi
	if [ ! -f "$build/build.ninja" ]; then
		bench_say "configuring $build"
		meson setup ${bench_cross[@]+"${bench_cross[@]}"} "$build" --buildtype=release > /dev/null ||
			bench_die "meson setup $build failed (see $build/meson-logs/meson-log.txt)"
	fi
	bench_say "building mayfly"
	ninja -C "$build" > /dev/null
	if [ "$with_guest" = 1 ]; then
		bench_say "building the guest (cached after the first time)"
		guest=$(tools/build-guest ${BENCH_ARCH:+--arch "$BENCH_ARCH"} | tail -n 1)
	fi
}

# bench_payload FILE...: $payload, a fresh directory removed when the script exits,
# holding FILEs (symlinks followed): what is copied to the machine that runs bench.sh.
# Also bench-payload.sh, what bench.sh scripts share: `. ./bench-payload.sh` gives
# rc=0 (bench.sh ends with exit $rc) and fail WHY (a "failed WHY" line for the
# benchmark's parser; rc=1).
bench_payload() {
	payload=$(mktemp -d "${TMPDIR:-/tmp}/$bench_name.XXXXXX")
	# shellcheck disable=SC2064  # $payload is fixed from here on
	trap "rm -rf '$payload'" EXIT
	[ $# -eq 0 ] || cp -L "$@" "$payload/"
	cat > "$payload/bench-payload.sh" <<'SH'
rc=0
fail() {
	echo "failed $*"
	rc=1
}
SH
}

# bench_static NAME SRC: SRC compiled into $payload/NAME, static (a guest has no
# libc to load; the same binary runs on the host side too).
bench_static() {
	gcc -O2 -Wall -Wextra -Werror -static -o "$payload/$1" "$2" ||
		bench_die "building $2 failed"
}

# bench_initrd PROG...: $payload/initrd.img, the default guest's initramfs with each
# $payload/PROG added as /bin/PROG. Linux unpacks concatenated archives into one
# root: the guest's (gzip), then an uncompressed one holding just the programs (its
# /bin comes from the first).
bench_initrd() {
	local extra=$payload/extra p
	mkdir -p "$extra/bin"
	for p in "$@"; do cp "$payload/$p" "$extra/bin/$p"; done
	(cd "$extra" && for p in "$@"; do echo "bin/$p"; done |
		cpio -o -H newc -R 0:0 --reproducible --quiet) > "$payload/extra.cpio"
	cat "$guest/initramfs.cpio.gz" "$payload/extra.cpio" > "$payload/initrd.img"
	rm -rf "$extra" "$payload/extra.cpio"
}

# bench_kvm_direct: true when this host's /dev/kvm can run the benchmarks: usable,
# and not kvm_pvm, which runs neither a Linux guest nor QEMU (shared/ENVIRONMENT.md;
# only mayfly and bare-kvm boot tiny guests there, so even bench-startup has no
# peer). MAYFLY_KVM_DIRECT=0 forces the nested harness.
bench_kvm_direct() {
	[[ ${MAYFLY_KVM_DIRECT:-1} != 0 && -c /dev/kvm && -w /dev/kvm && ! -d /sys/module/kvm_pvm ]]
}

# bench_run [--with-qemu] [--timeout SEC] [--data DIR]: run $payload/bench.sh in
# the payload dir, on this host's /dev/kvm when bench_kvm_direct says so, else in
# the nested harness (--with-qemu puts QEMU in L1; --timeout bounds the harness
# run, default 1800 s; --data: DIR's big files (root images) are at
# $MAYFLY_TEST_DATA: DIR itself here, a read-only disk at /data in L1, where it
# is unset). Its output goes to stderr as it comes and into $payload/results;
# $bench_rc gets its exit status, $where says where it ran. Never exits itself: a
# failed run may still have left results worth reading.
bench_run() {
	local harness_args=() timeout_s=1800 data=""
	while [ $# -gt 0 ]; do
		case $1 in
		--with-qemu) harness_args+=(--with-qemu); shift ;;
		--data) data=$2; harness_args+=(--data "$2"); shift 2 ;;
		--timeout) timeout_s=$2; shift 2 ;;
		*) bench_die "bench_run: unknown argument $1" ;;
		esac
	done
	chmod +x "$payload/bench.sh"
	bench_rc=0
	# shellcheck disable=SC2034  # bench_note: for the benchmarks' tables
	if [ "${BENCH_ARCH:-}" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
		[ ${#harness_args[@]} -eq 0 ] || bench_die "bench_run: no QEMU or data disk in the arm64 harness yet"
		where="the arm64 harness (QEMU TCG emulating an Arm host with EL2; absolute times are emulated)"
		bench_note="In the arm64 harness the guest runs under KVM inside a TCG-emulated Arm host: absolute
numbers mean nothing for real hosts; only the ratios, same harness run, say something."
		bench_say "running inside the arm64 harness"
		tools/harness/run-arm64 --timeout "$timeout_s" "$payload" -- ./bench.sh 2>&1 |
			tee "$payload/results" >&2 || bench_rc=$?
	elif bench_kvm_direct; then
		where="this host's /dev/kvm"
		bench_note=""
		bench_say "running on $where"
		(cd "$payload" && MAYFLY_TEST_DATA=$data ./bench.sh) 2>&1 | tee "$payload/results" >&2 ||
			bench_rc=$?
	else
		where="the nested harness (QEMU TCG emulating AMD-V; absolute times are emulated)"
		bench_note="In the nested harness the guest runs under KVM inside a TCG-emulated host: absolute
numbers mean nothing for real hosts; only the ratios, same harness run, say something."
		bench_say "no /dev/kvm here that runs Linux guests and QEMU; running inside the nested harness"
		tools/harness/run "${harness_args[@]}" --timeout "$timeout_s" "$payload" -- ./bench.sh 2>&1 |
			tee "$payload/results" >&2 || bench_rc=$?
	fi
	[ "$bench_rc" = 0 ] || bench_say "the run failed (exit $bench_rc); see the lines above"
}

# bench_exit STATUS: end the benchmark: with the run's own failure status if it
# failed (even when its partial results could be read), else with STATUS.
bench_exit() {
	[ "$bench_rc" = 0 ] || exit "$bench_rc"
	exit "$1"
}
