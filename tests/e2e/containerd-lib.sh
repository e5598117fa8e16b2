# shellcheck shell=sh
# containerd-lib.sh - a private containerd for the containerd suite
# (run-containerd-tests.sh) and tools/bench-containerd, sourced by both: its
# own config, root, state and sockets under one directory, the CRI plugin and
# the snapshotters L1 cannot run left out. POSIX sh, busybox tools.
#
#   containerd_start DIR   (again after containerd_stop: a restart on the same
#                          root) containerd in the background, until it answers
#                          (30 s at most); 1 if it never does. Sets
#                          containerd_sock and containerd_pid; its log is
#                          DIR/containerd.log.
#   containerd_stop        SIGTERM, then wait for it.

containerd_start() {
	containerd_dir=$1
	containerd_sock=$containerd_dir/c.sock
	mkdir -p "$containerd_dir"
	cat >"$containerd_dir/config.toml" <<CFG
version = 2
root = "$containerd_dir/root"
state = "$containerd_dir/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$containerd_sock"
[ttrpc]
  address = "$containerd_sock.ttrpc"
CFG
	containerd --config "$containerd_dir/config.toml" >>"$containerd_dir/containerd.log" 2>&1 &
	containerd_pid=$!
	containerd_i=0
	while ! ctr -a "$containerd_sock" version >/dev/null 2>&1; do
		containerd_i=$((containerd_i + 1))
		[ $containerd_i -lt 100 ] || return 1
		sleep 0.3
	done
}

containerd_stop() {
	[ -n "${containerd_pid:-}" ] || return 0
	kill "$containerd_pid" 2>/dev/null
	wait "$containerd_pid" 2>/dev/null
	containerd_pid=""
}
