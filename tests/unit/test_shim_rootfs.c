/* test_shim_rootfs.c - a container's root image: built once per content and origin, found again by the next container of the same image, never mistaken for another's; mounts of unknown kinds refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/rootfs.h"

static char base[64];

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	char path[256];

	snprintf(base, sizeof(base), "/tmp/mayfly-rootfs-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(path, sizeof(path), "%s/tree", base);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/tree/etc", base);
	mkdir(path, 0755);
	put("tree/etc/hello", "hello\n");
	snprintf(path, sizeof(path), "%s/cache", base);
	setenv("MAYFLY_CACHE", path, 1);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(shim_rootfs, .init = setup, .fini = teardown, .timeout = 120);

Test(shim_rootfs, built_once_found_again)
{
	char tree[128], a[4200], b[4200], c[4200], d[4200], err[300] = "";
	struct stat st;
	bool built;

	snprintf(tree, sizeof(tree), "%s/tree", base);
	cr_assert_eq(rootfs_image(tree, "overlay lowerdir=/s/1", false, a, sizeof(a), &built, err,
				  sizeof(err)), 0, "%s", err);
	cr_assert(built);
	cr_assert_eq(stat(a, &st), 0);
	cr_assert(S_ISREG(st.st_mode) && st.st_size >= (64 << 20));
	/* The same tree and origin: no build. */
	cr_assert_eq(rootfs_image(tree, "overlay lowerdir=/s/1", false, b, sizeof(b), &built, err,
				  sizeof(err)), 0, "%s", err);
	cr_assert_not(built);
	cr_assert_str_eq(a, b);
	/* The root's own time is an overlay's fresh upper directory's, one per
	 * container: it does not make another image. */
	cr_assert_eq(utimensat(AT_FDCWD, tree, (struct timespec[2]){ { 0, UTIME_OMIT }, { 12345, 0 } },
			       0), 0);
	cr_assert_eq(rootfs_image(tree, "overlay lowerdir=/s/1", false, b, sizeof(b), &built, err,
				  sizeof(err)), 0, "%s", err);
	cr_assert_not(built, "a new time on the root made another image");
	cr_assert_str_eq(a, b);
	/* The same listing from another origin is another image. */
	cr_assert_eq(rootfs_image(tree, "overlay lowerdir=/s/2", false, c, sizeof(c), &built, err,
				  sizeof(err)), 0, "%s", err);
	cr_assert(built);
	cr_assert_str_neq(a, c);
	/* Another file: another key. */
	put("tree/etc/more", "x\n");
	cr_assert_eq(rootfs_image(tree, "overlay lowerdir=/s/1", false, d, sizeof(d), &built, err,
				  sizeof(err)), 0, "%s", err);
	cr_assert(built);
	cr_assert_str_neq(a, d);
}

Test(shim_rootfs, the_image_holds_the_tree)
{
	char tree[128], img[4200], cmd[4400], err[300] = "";
	bool built;

	snprintf(tree, sizeof(tree), "%s/tree", base);
	cr_assert_eq(rootfs_image(tree, "o", false, img, sizeof(img), &built, err, sizeof(err)), 0, "%s", err);
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /etc/hello' '%s' 2>/dev/null | grep -qx hello", img);
	cr_assert_eq(system(cmd), 0, "the image lacks /etc/hello");
}

Test(shim_rootfs, a_missing_tree_is_refused)
{
	char img[4200], err[300] = "";
	bool built;

	cr_assert_lt(rootfs_image("/nonexistent/tree", "o", false, img, sizeof(img), &built, err,
				  sizeof(err)), 0);
	cr_assert_neq(err[0], '\0');
}

Test(shim_rootfs, unknown_mounts_are_refused)
{
	const char *opts[] = { "lowerdir=/a" };
	struct rootfs_mount tmpfs = { "tmpfs", "none", NULL, 0 };
	struct rootfs_mount comma = { "overlay", "overlay", (const char *[]){ "lowerdir=/a,upperdir=/b" }, 1 };
	char target[128], err[300];

	(void)opts;
	snprintf(target, sizeof(target), "%s/mnt", base);
	cr_assert_eq(rootfs_mount(&tmpfs, 1, target, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "tmpfs"));
	cr_assert_eq(rootfs_mount(&comma, 1, target, err, sizeof(err)), -EINVAL);
	cr_assert_eq(rootfs_mount(&tmpfs, 0, target, err, sizeof(err)), -EINVAL);
}

Test(shim_rootfs, origin_names_the_layers)
{
	const char *o1[] = { "index=off", "workdir=/w", "upperdir=/u", "lowerdir=/l2:/l1" };
	const char *o2[] = { "rbind", "rw" };
	struct rootfs_mount m = { "overlay", "overlay", o1, 4 }, b = { "bind", "/snap/7", o2, 2 };
	char out[256];

	cr_assert_not(rootfs_origin(&m, 1, out, sizeof(out)));
	cr_assert_str_eq(out, "lowerdir=/l2:/l1\n");
	/* A native snapshotter's directory is named by its content alone. */
	cr_assert(rootfs_origin(&b, 1, out, sizeof(out)));
	cr_assert_str_eq(out, "");
}

/* By content: the same files in two directories (two containers of one
 * image, native snapshotter), even with other times, are one image; other
 * bytes of the same size and time are another. */
Test(shim_rootfs, by_content_two_copies_are_one_image)
{
	char tree[128], copy[128], cmd[512], a[4200], b[4200], c[4200], err[300] = "";
	bool built;

	snprintf(tree, sizeof(tree), "%s/tree", base);
	snprintf(copy, sizeof(copy), "%s/copy", base);
	snprintf(cmd, sizeof(cmd), "sleep 0.01; cp -r --preserve=mode '%s' '%s'", tree, copy);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(rootfs_image(tree, "", true, a, sizeof(a), &built, err, sizeof(err)), 0, "%s", err);
	cr_assert(built);
	cr_assert_eq(rootfs_image(copy, "", true, b, sizeof(b), &built, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(built);
	cr_assert_str_eq(a, b);
	/* Same size, same mtime, other bytes. */
	snprintf(cmd, sizeof(cmd), "printf 'HELLO\\n' >'%s/etc/hello' && touch -r '%s/etc/hello' "
		 "'%s/etc/hello'", copy, tree, copy);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(rootfs_image(copy, "", true, c, sizeof(c), &built, err, sizeof(err)), 0, "%s", err);
	cr_assert(built);
	cr_assert_str_neq(a, c);
}
