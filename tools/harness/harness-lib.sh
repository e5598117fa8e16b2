# shellcheck shell=bash
# harness-lib.sh - what the x86 and arm64 harness runners (tools/harness/run,
# run-arm64) share. Sourced, not run.

# Why the last harness_* call failed: one line, for the runner's own fail.
# shellcheck disable=SC2034  # read by the runners
harness_why=""

# harness_data_image DIR IMG: an ext4 at IMG of the files in DIR (symlinks
# followed; hard links where the file system allows, else copies, holes kept),
# without journal or checksums, for L1 to mount read-only at /data: big files
# (root images) that would otherwise sit in L1's RAM. 0, or 1 with one line
# in harness_why.
harness_data_image() {
	local dir=$1 img=$2 f real bytes=0
	local files=$img.files
	harness_why=""
	mkdir -p "$files"
	for f in "$dir"/*; do
		[ -f "$f" ] || continue
		real=$(realpath "$f")
		ln "$real" "$files/${f##*/}" 2>/dev/null || cp --sparse=always "$real" "$files/${f##*/}" ||
			{ harness_why="copying $f for --data failed"; return 1; }
		bytes=$((bytes + $(stat -c %s "$real")))
	done
	truncate -s "$((bytes * 11 / 10 / 1048576 + 32))M" "$img"
	PATH=$PATH:/sbin:/usr/sbin mke2fs -q -F -t ext4 -O ^has_journal,^metadata_csum,^64bit \
		-d "$files" "$img" >"$img.log" 2>&1 ||
		{ harness_why="mke2fs for --data failed: $(tail -n 1 "$img.log")"; return 1; }
	rm -rf "$files"
}
