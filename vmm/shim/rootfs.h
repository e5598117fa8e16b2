/* rootfs.h - a container's root file system: containerd's mounts put in place in the bundle, and the ext4 image the VM boots it from, built once per content and cached. */
#ifndef MAYFLY_SHIM_ROOTFS_H
#define MAYFLY_SHIM_ROOTFS_H

#include <stdbool.h>
#include <stddef.h>

#define ROOTFS_MAX_MOUNTS  8
#define ROOTFS_MAX_OPTIONS 32
#define ROOTFS_OPTION_MAX  8192   /* one option (an overlay's lowerdir list) */
#define ROOTFS_MAX_FILES   (1u << 20)   /* entries in a tree we image */
#define ROOTFS_MAX_DEPTH   256

/* One of containerd's rootfs mounts (containerd.types.Mount). */
struct rootfs_mount {
	const char *type;          /* "overlay", "bind" (native snapshotter), ... */
	const char *source;
	const char **options;      /* noptions of them */
	int noptions;
};

/* Mount ms, in order, at target (the bundle's rootfs directory): an
 * overlay with its options, a bind (rbind, ro) of a directory. Types other
 * than overlay and bind, options longer than ROOTFS_OPTION_MAX or holding
 * a comma inside one option are refused. 0 or -errno with one line in err;
 * nothing stays mounted on failure. */
int rootfs_mount(const struct rootfs_mount *ms, int n, const char *target, char *err,
		 size_t errlen);

/* Unmount whatever is mounted at target (all of it, lazily if busy).
 * 0, or -errno other than "not mounted". */
int rootfs_unmount(const char *target);

/* The ext4 image of the tree at root: <cache>/shim-images/<key>.ext4,
 * key the sha256 of `origin` and of the tree's listing (every entry's
 * path, type, mode, owner, size, modification time and link target; with
 * by_content, every file's sha256 too): a second container of the same
 * image finds it built, and no image's tree can pose as another's. origin
 * says where the tree comes from: the overlay's lower directories are
 * containerd's snapshots of the image's layers, one content each, so a
 * listing is enough; a native snapshotter's copy is a directory of each
 * container's own, so only its content can name it (by_content). Built with mke2fs -d into a temporary
 * file and renamed into place (one builder at a time per key, under a
 * lock); sized for the tree's content with room to spare. The walk is
 * bounded (ROOTFS_MAX_FILES, ROOTFS_MAX_DEPTH) and follows no symbolic
 * link. 0 with its path in out, or -errno with one line in err. */
int rootfs_image(const char *root, const char *origin, bool by_content, char *out, size_t len,
		 bool *built, char *err, size_t errlen);

/* origin and by_content for rootfs_image: overlays' lowerdir options, in
 * order, into out; by content when a mount is not an overlay (a bind). */
bool rootfs_origin(const struct rootfs_mount *ms, int n, char *out, size_t len);

#endif
