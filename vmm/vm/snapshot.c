/* snapshot.c - a running VM saved whole into a snapshot directory, and a snapshot loaded and put back in place. */
#include "vm/snapshot.h"
#include "lib/errmsg.h"
#include "vm/vm.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "snapshot/codec.h"
#include "snapshot/workingset.h"
#include "vm/arch.h"
#include "vm/devices.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/kvm.h>
#include <unistd.h>

#define STATE_MAX (64u << 20)   /* a state file is kilobytes; a bigger one is not ours */

int snapshot_path(const char *dir, const char *name, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* ---- the files section ---- */

static void put_id(struct snap_out *o, const struct image_id *id)
{
	snap_out_put(o, id->sha256, IMAGE_HASH_LEN);
	snap_out_u64(o, id->dev);
	snap_out_u64(o, id->ino);
	snap_out_u64(o, id->size);
	snap_out_u64(o, (uint64_t)id->mtime_ns);
	snap_out_u64(o, (uint64_t)id->ctime_ns);
}

static void get_id(struct snap_in *in, struct image_id *id)
{
	snap_in_get(in, id->sha256, IMAGE_HASH_LEN);
	id->dev = snap_in_u64(in);
	id->ino = snap_in_u64(in);
	id->size = snap_in_u64(in);
	id->mtime_ns = (int64_t)snap_in_u64(in);
	id->ctime_ns = (int64_t)snap_in_u64(in);
}

static void files_encode(const struct snapshot_files *f, struct snap_out *o)
{
	put_id(o, &f->kernel);
	snap_out_u32(o, f->has_rootfs);
	if (f->has_rootfs)
		put_id(o, &f->rootfs);
	put_id(o, &f->memory);
	snap_out_u32(o, f->has_overlay);
	if (f->has_overlay)
		put_id(o, &f->overlay);
}

static int files_decode(struct snapshot_files *f, const struct snap_section *sec, const char **why)
{
	struct snap_in in;
	uint32_t flag;

	memset(f, 0, sizeof(*f));
	snap_in_init(&in, sec->data, sec->len);
	get_id(&in, &f->kernel);
	flag = snap_in_u32(&in);
	f->has_rootfs = flag == 1;
	if (f->has_rootfs)
		get_id(&in, &f->rootfs);
	get_id(&in, &f->memory);
	flag |= snap_in_u32(&in) << 1;
	f->has_overlay = (flag & 2) != 0;
	if (f->has_overlay)
		get_id(&in, &f->overlay);
	if (!snap_in_end(&in) || (flag & ~3u))
		return errmsg_why(why, -EBADMSG, "snapshot files section is malformed");
	return 0;
}

/* ---- load ---- */

static int read_state(struct snapshot *s, const char *path, const char **why)
{
	struct stat st;
	size_t done = 0;
	/* NONBLOCK: a FIFO put there must not hang the open (it is refused below). */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc;

	if (fd < 0)
		return errmsg_why(why, -errno, errno == ENOENT ? "no snapshot in '%s' (no state file)" :
				"cannot open '%s': %s", s->dir, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > STATE_MAX) {
		close(fd);
		return errmsg_why(why, -EBADMSG, "'%s' is not a snapshot state file", path);
	}
	s->state_len = (size_t)st.st_size;
	s->state = malloc(s->state_len);
	if (!s->state) {
		close(fd);
		return errmsg_why(why, -ENOMEM, "out of memory for the state file");
	}
	while (done < s->state_len) {
		ssize_t n = read(fd, s->state + done, s->state_len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n ? -errno : -EBADMSG;
			close(fd);
			return errmsg_why(why, rc, "cannot read '%s': %s", path,
					n ? strerror(errno) : "it shrank");
		}
		done += (size_t)n;
	}
	close(fd);
	return 0;
}

/* A file of the snapshot itself, unchanged since it was written. */
static int check_own_file(const struct snapshot *s, const char *name, const struct image_id *id,
			  const char **why)
{
	char path[CONFIG_PATH_MAX + 64];
	int rc = snapshot_path(s->dir, name, path, sizeof(path));

	if (!rc)
		rc = image_id_check_sparse(path, id, why);
	if (rc == -ESTALE)
		return errmsg_why(why, rc, "'%s' is not the file this snapshot wrote (changed or "
				"corrupt): make the snapshot again", path);
	return rc;
}

int snapshot_load(struct snapshot *s, const char *dir, const char **why)
{
	static const uint32_t required[] = { SNAP_SEC_CONFIG, SNAP_SEC_FILES };
	char path[CONFIG_PATH_MAX + 64], name[32];
	int rc;

	memset(s, 0, sizeof(*s));
	if (strlen(dir) >= CONFIG_PATH_MAX || snapshot_path(dir, SNAPSHOT_STATE, path, sizeof(path)))
		return errmsg_why(why, -ENAMETOOLONG, "snapshot path too long");
	s->dir = strdup(dir);
	if (!s->dir)
		return errmsg_why(why, -ENOMEM, "out of memory");
	rc = read_state(s, path, why);
	if (!rc && !(s->file = malloc(sizeof(*s->file))))
		rc = errmsg_why(why, -ENOMEM, "out of memory");
	if (!rc)
		rc = snap_parse(s->file, s->state, s->state_len, required,
				sizeof(required) / sizeof(required[0]), why);
	if (!rc)
		rc = config_decode(&s->cfg, snap_find(s->file, SNAP_SEC_CONFIG)->data,
				   snap_find(s->file, SNAP_SEC_CONFIG)->len, why);
	if (!rc)
		rc = arch_snapshot_load(s->file, s->cfg.cpus, &s->arch, why);
	if (!rc)
		rc = files_decode(&s->files, snap_find(s->file, SNAP_SEC_FILES), why);
	if (!rc && snap_find(s->file, SNAP_SEC_WORKINGSET))
		rc = workingset_decode(snap_find(s->file, SNAP_SEC_WORKINGSET)->data,
				       snap_find(s->file, SNAP_SEC_WORKINGSET)->len,
				       (s->cfg.mem_mib << 20) / WORKINGSET_PAGE_SIZE, &s->ws, &s->nr_ws,
				       why);
	if (!rc && s->files.has_rootfs != (s->cfg.rootfs[0] != 0))
		rc = errmsg_why(why, -EBADMSG, "snapshot files section does not match its config");
	if (!rc)
		rc = check_own_file(s, SNAPSHOT_MEMORY, &s->files.memory, why);
	if (!rc && s->files.has_overlay) {
		snprintf(name, sizeof(name), SNAPSHOT_OVERLAY_FMT, "vda");
		rc = check_own_file(s, name, &s->files.overlay, why);
	}
	if (rc)
		snapshot_free(s);
	return rc;
}

void snapshot_free(struct snapshot *s)
{
	config_free(&s->cfg);
	free(s->dir);
	s->dir = NULL;
	free(s->state);
	free(s->file);
	arch_snapshot_free(s->arch);
	free(s->ws);
	s->ws = NULL;
	s->nr_ws = 0;
	s->state = NULL;
	s->file = NULL;
	s->arch = NULL;
}

/* ---- save ---- */

/* The architecture's sections (VM-wide state, each vCPU, the CPU
 * description), then the config. */
static int save_cpu_state(struct vm *vm, struct snap_writer *w, const char **why)
{
	struct snap_out o;
	int rc = arch_snapshot_save(vm->arch, vm->kvm.sys_fd, vm->kvm.vm_fd, vm->vcpus, vm->nr_vcpus,
				    w, why);

	if (rc)
		return rc;
	snap_out_init(&o);
	config_encode(vm->cfg, &o);
	return snap_writer_add_out(w, SNAP_SEC_CONFIG, &o, why);
}

int vm_workingset_begin(struct vm *vm)
{
	int rc = kvm_dirty_log_start(&vm->kvm, &vm->mem);

	vm->logging_writes = !rc;
	return rc;
}

/* The pages written since vm_workingset_begin (vCPUs parked), as the
 * optional working set section. */
static int save_workingset(struct vm *vm, struct snap_writer *w, struct snapshot_stats *stats,
			   const char **why)
{
	uint64_t pages = vm->mem.total / WORKINGSET_PAGE_SIZE;
	uint8_t *bitmap;
	struct snap_out o;
	int rc;

	if (!vm->logging_writes)
		return 0;
	bitmap = calloc((size_t)(pages + 7) / 8, 1);
	if (!bitmap)
		return errmsg_why(why, -ENOMEM, "out of memory");
	rc = kvm_dirty_log_get(&vm->kvm, &vm->mem, bitmap);
	if (rc) {
		free(bitmap);
		return errmsg_why(why, rc, "KVM_GET_DIRTY_LOG: %s", strerror(-rc));
	}
	snap_out_init(&o);
	workingset_encode(bitmap, pages, &o, &stats->workingset_pages);
	free(bitmap);
	return snap_writer_add_out(w, SNAP_SEC_WORKINGSET, &o, why);
}

int vm_snapshot_capture(struct vm *vm, const struct snapshot_fds *fds, struct snap_writer *w,
			struct snapshot_files *f, struct snapshot_stats *stats, const char **why)
{
	struct mem_save_stats ms;
	int rc;

	memset(stats, 0, sizeof(*stats));
	f->has_overlay = false;
	rc = save_cpu_state(vm, w, why);
	if (!rc)
		rc = save_workingset(vm, w, stats, why);
	if (!rc)
		rc = mem_save_fd(&vm->mem, fds->memory, &ms, why);
	if (rc)
		return rc;
	stats->memory_bytes = ms.data_bytes;
	return vm_devices_save(vm, fds->overlay, w, f, &stats->overlay_bytes, why);
}

int vm_snapshot_finish(struct snap_writer *w, const struct snapshot_fds *fds,
		       struct snapshot_files *f, struct snapshot_stats *stats, const char **why)
{
	struct snap_out o;
	struct stat st;
	int rc = image_id_sparse_fd(fds->memory, &f->memory, why);

	if (!rc && f->has_overlay)
		rc = image_id_sparse_fd(fds->overlay, &f->overlay, why);
	if (rc)
		return rc;
	snap_out_init(&o);
	files_encode(f, &o);
	rc = snap_writer_add_out(w, SNAP_SEC_FILES, &o, why);
	if (!rc)
		rc = snap_writer_write_fd(w, fds->state, why);
	/* On disk before anyone renames them into place. */
	if (!rc && (fsync(fds->memory) < 0 || fsync(fds->state) < 0 ||
		    (f->has_overlay && fsync(fds->overlay) < 0)))
		rc = errmsg_why(why, -errno, "cannot sync the snapshot files: %s", strerror(errno));
	if (!rc && fstat(fds->state, &st) == 0)
		stats->state_bytes = (size_t)st.st_size;
	return rc;
}

/* The i-th name a snapshot directory may hold (only those are ever
 * removed or taken over with it): the path in dir, or false past the last. */
static bool snapshot_file(const char *dir, unsigned i, char *path, size_t len)
{
	static const char *const names[] = { SNAPSHOT_STATE, SNAPSHOT_MEMORY };
	const unsigned fixed = sizeof(names) / sizeof(names[0]);
	char name[32], dev[8];

	if (i >= fixed + CONFIG_MAX_DISKS)
		return false;
	if (i < fixed) {
		snprintf(name, sizeof(name), "%s", names[i]);
	} else {
		snprintf(dev, sizeof(dev), "vd%c", 'a' + (int)(i - fixed));
		snprintf(name, sizeof(name), SNAPSHOT_OVERLAY_FMT, dev);
	}
	if (snapshot_path(dir, name, path, len))
		path[0] = '\0';
	return true;
}

static void remove_snapshot_dir(const char *dir)
{
	char path[CONFIG_PATH_MAX + 64];

	for (unsigned i = 0; snapshot_file(dir, i, path, sizeof(path)); i++)
		if (path[0])
			unlink(path);
	rmdir(dir);
}

/* What a jailed VMM wrote becomes the caller's: the directory (0700: no
 * other user reaches what is in it) and state. Not memory and disk-vda:
 * state records their stat identity, change time included, and a chown
 * moves the change time, so every restore would then hash them whole.
 * The jailed side could write there: through a descriptor of the
 * directory (never followed through a link), and state only as the
 * regular file it must be, never a link to something else. Nothing to
 * do, and no system call the snapshot role lacks, when it is ours. */
static int give_back(const char *tmp, const char **why)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	struct stat st;
	int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc = 0;

	if (dfd < 0)
		return errmsg_why(why, -errno, "cannot take over '%s': %s", tmp, strerror(errno));
	if (fstatat(dfd, SNAPSHOT_STATE, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = errmsg_why(why, -errno, "cannot take over '%s/" SNAPSHOT_STATE "': %s", tmp,
				strerror(errno));
	else if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		rc = errmsg_why(why, -EINVAL, "'%s/" SNAPSHOT_STATE "' is not a regular file of its "
				"own: refused", tmp);
	else if ((st.st_uid != uid || st.st_gid != gid) &&
		 fchownat(dfd, SNAPSHOT_STATE, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		rc = errmsg_why(why, -errno, "cannot take over '%s/" SNAPSHOT_STATE "': %s", tmp,
				strerror(errno));
	if (!rc && fstat(dfd, &st) < 0)
		rc = errmsg_why(why, -errno, "cannot take over '%s': %s", tmp, strerror(errno));
	else if (!rc && (st.st_uid != uid || st.st_gid != gid) && fchown(dfd, uid, gid) < 0)
		rc = errmsg_why(why, -errno, "cannot take over '%s': %s", tmp, strerror(errno));
	close(dfd);
	return rc;
}

/* Put the finished tmp directory where dir is: a new name, or swapped
 * whole with an older snapshot (a VM running from the old one keeps the
 * files it mapped). Anything else at dir is not ours to replace. give:
 * the files were the jailed VMM's, and become ours first. */
static int install(const char *tmp, const char *dir, bool give, const char **why)
{
	char path[CONFIG_PATH_MAX + 64];
	struct stat st;
	int rc = give ? give_back(tmp, why) : 0;

	if (rc)
		return rc;
	if (rename(tmp, dir) == 0)
		return 0;
	if (errno != EEXIST && errno != ENOTEMPTY)
		return errmsg_why(why, -errno, "cannot create '%s': %s", dir, strerror(errno));
	if (snapshot_path(dir, SNAPSHOT_STATE, path, sizeof(path)) || stat(path, &st) < 0)
		return errmsg_why(why, -EEXIST, "'%s' exists and is not a snapshot directory", dir);
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) < 0)
		return errmsg_why(why, -errno, "cannot replace the snapshot in '%s': %s", dir,
				strerror(errno));
	remove_snapshot_dir(tmp);   /* now the old one */
	return 0;
}

void snapshot_fds_close(struct snapshot_fds *fds)
{
	int *all[3] = { &fds->memory, &fds->overlay, &fds->state };

	for (int i = 0; i < 3; i++) {
		if (*all[i] >= 0)
			close(*all[i]);
		*all[i] = -1;
	}
}

/* The three files of a new snapshot directory, empty, mode 0600. */
static int open_files(const char *tmp, struct snapshot_fds *fds, const char **why)
{
	const char *names[3] = { SNAPSHOT_MEMORY, SNAPSHOT_OVERLAY_ROOT, SNAPSHOT_STATE };
	int *out[3] = { &fds->memory, &fds->overlay, &fds->state };
	char path[CONFIG_PATH_MAX + 64];

	for (int i = 0; i < 3; i++) {
		if (snapshot_path(tmp, names[i], path, sizeof(path)))
			return errmsg_why(why, -ENAMETOOLONG, "snapshot path too long");
		*out[i] = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (*out[i] < 0)
			return errmsg_why(why, -errno, "cannot create %s: %s", path, strerror(errno));
	}
	return 0;
}

int vm_snapshot_tmpdir(const char *dir, const struct vm_config *cfg, char *tmp, size_t len,
		       struct snapshot_sources *src, const char **why)
{
	char made[CONFIG_PATH_MAX + 32], abs[PATH_MAX];
	int rc;

	memset(src, 0, sizeof(*src));
	rc = image_id_get(cfg->kernel, &src->kernel, why);
	if (!rc && cfg->rootfs[0]) {
		src->has_rootfs = true;
		rc = image_id_get(cfg->rootfs, &src->rootfs, why);
	}
	if (rc)
		return rc;
	if (snprintf(made, sizeof(made), "%s.tmp-XXXXXX", dir) >= (int)sizeof(made))
		return errmsg_why(why, -ENAMETOOLONG, "snapshot path too long");
	if (!mkdtemp(made))
		return errmsg_why(why, -errno, "cannot create a directory beside '%s': %s", dir,
				strerror(errno));
	/* Absolute: the jail bind-mounts it at the same path. */
	if (!realpath(made, abs)) {
		rc = -errno;
		rmdir(made);
		return errmsg_why(why, rc, "cannot resolve '%s': %s", made, strerror(-rc));
	}
	if (snprintf(tmp, len, "%s", abs) >= (int)len) {
		rmdir(made);
		return errmsg_why(why, -ENAMETOOLONG, "snapshot path too long");
	}
	return 0;
}

void vm_snapshot_discard(const char *tmp)
{
	remove_snapshot_dir(tmp);
}

static int install_or_discard(const char *tmp, const char *dir, bool give, const char **why)
{
	int rc = install(tmp, dir, give, why);

	if (rc)
		remove_snapshot_dir(tmp);
	return rc;
}

int vm_snapshot_install(const char *tmp, const char *dir, const char **why)
{
	return install_or_discard(tmp, dir, true, why);
}

int vm_snapshot_install_own(const char *tmp, const char *dir, const char **why)
{
	return install_or_discard(tmp, dir, false, why);
}

int vm_snapshot_save(struct vm *vm, const char *tmp, const struct snapshot_sources *src,
		     struct snapshot_stats *stats, const char **why)
{
	struct snapshot_fds fds = { -1, -1, -1 };
	char path[CONFIG_PATH_MAX + 64];
	struct snapshot_files f = { 0 };
	struct snap_writer w;
	uint64_t t0;
	int rc;

	memset(stats, 0, sizeof(*stats));
	f.kernel = src->kernel;
	f.has_rootfs = src->has_rootfs;
	f.rootfs = src->rootfs;
	rc = vm_pause(vm);
	if (rc)
		return errmsg_why(why, rc, "the VM ended before it could be paused");
	t0 = clock_now_ns();
	/* Device work drained: no request is half done once this returns. */
	event_loop_pause(&vm->io);
	snap_writer_init(&w);
	rc = open_files(tmp, &fds, why);
	if (!rc)
		rc = vm_snapshot_capture(vm, &fds, &w, &f, stats, why);
	if (!rc)
		rc = vm_snapshot_finish(&w, &fds, &f, stats, why);
	snap_writer_free(&w);
	snapshot_fds_close(&fds);
	/* No copy-on-write root: no overlay file. */
	if (!rc && !f.has_overlay && !snapshot_path(tmp, SNAPSHOT_OVERLAY_ROOT, path, sizeof(path)))
		unlink(path);
	stats->pause_us = (clock_now_ns() - t0) / 1000;
	return rc;
}

/* ---- restore ---- */

int snapshot_check_host(const struct snapshot *s, int kvm_sys_fd, int vm_fd, const char **why)
{
	return arch_snapshot_check_host(s->arch, kvm_sys_fd, vm_fd, why);
}

/* The devices (the architecture's among them), then the architecture's
 * VM-wide and vCPU state, then the devices let go. */
int vm_snapshot_restore(struct vm *vm, const struct snapshot *s, const char **why)
{
	int rc = vm_devices_restore(vm, s, why);

	if (!rc)
		rc = arch_snapshot_restore(vm->arch, s->file, vm->kvm.vm_fd, vm->vcpus, vm->nr_vcpus,
					   why);
	if (!rc)
		vm_devices_resume(vm);
	return rc;
}
