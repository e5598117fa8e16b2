/* disk.c - what the disk backends share: opening and locking the image, range checks, close. */
#include "disk/backend.h"
#include "disk/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* splitmix64's finaliser: spreads device and inode numbers over all bits. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The serial GET_ID returns: "mayfly-" and 13 hex digits (20 bytes, the
 * virtio maximum). It names the image, not the VM, so it is the same every
 * boot and a guest can find its disk by /dev/disk/by-id. A regular file is
 * named by device and inode (stable while the file exists, whatever its
 * path); a block device by its own device number. */
static void disk_make_id(struct disk *disk, const struct stat *st)
{
	uint64_t h;

	if (S_ISBLK(st->st_mode))
		h = mix64((uint64_t)st->st_rdev);
	else
		h = mix64(mix64((uint64_t)st->st_dev) ^ (uint64_t)st->st_ino);
	snprintf(disk->id, sizeof(disk->id), "mayfly-%013" PRIx64, h & (((uint64_t)1 << 52) - 1));
}

static int disk_file_size(int fd, const struct stat *st, uint64_t *size, const char **why)
{
	if (S_ISREG(st->st_mode)) {
		*size = (uint64_t)st->st_size;
	} else if (S_ISBLK(st->st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size) < 0) {
			*why = "cannot read the size of the block device";
			return -errno;
		}
	} else {
		*why = "image is not a regular file or block device";
		return -EINVAL;
	}
	if (*size == 0) {
		*why = "image is empty";
		return -EINVAL;
	}
	if (*size % DISK_SECTOR_SIZE) {
		*why = "image size is not a multiple of 512 bytes";
		return -EINVAL;
	}
	/* Offsets become off_t for pread/pwrite. */
	if (*size > (uint64_t)INT64_MAX) {
		*why = "image is too large";
		return -EFBIG;
	}
	return 0;
}

int disk_file_open(struct disk *disk, const char *path, bool read_only, const char **why)
{
	int fd;

	memset(disk, 0, sizeof(*disk));
	disk->fd = -1;
	/* NONBLOCK so that a FIFO at PATH cannot hang us in open(); cleared
	 * by disk_file_adopt once it knows it is a file or block device. */
	fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int ret = -errno;

		*why = ret == -EISDIR ? "image is not a regular file or block device"
				      : "cannot open the image";
		return ret;
	}
	return disk_file_adopt(disk, fd, read_only, why);
}

int disk_file_adopt(struct disk *disk, int fd, bool read_only, const char **why)
{
	struct stat st;
	int flags, ret;

	memset(disk, 0, sizeof(*disk));
	disk->fd = -1;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || (!read_only && (flags & O_ACCMODE) != O_RDWR) ||
	    (read_only && (flags & O_ACCMODE) == O_WRONLY)) {
		ret = flags < 0 ? -errno : -EBADF;
		*why = "the image is not open for the access it needs";
		goto err_close_fd;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		*why = "cannot stat the image";
		goto err_close_fd;
	}
	ret = disk_file_size(fd, &st, &disk->size, why);
	if (ret)
		goto err_close_fd;
	if (fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		ret = -errno;
		*why = "cannot clear O_NONBLOCK on the image";
		goto err_close_fd;
	}
	/* Advisory, but every mayfly takes it: one writer, or any number of
	 * readers (read-only and copy-on-write disks), never both. */
	if (flock(fd, (read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
		ret = -errno;
		if (ret == -EWOULDBLOCK) {
			ret = -EBUSY;
			*why = "image is in use by another VM (locked)";
		} else {
			*why = "cannot lock the image";
		}
		goto err_close_fd;
	}
	disk->fd = fd;
	disk->read_only = read_only;
	disk_make_id(disk, &st);
	return 0;

err_close_fd:
	close(fd);
	disk->size = 0;
	return ret;
}

void disk_file_close(struct disk *disk)
{
	if (disk->fd >= 0)
		close(disk->fd);
	memset(disk, 0, sizeof(*disk));
	disk->fd = -1;
}

void disk_close(struct disk *disk)
{
	/* No ops: never opened, or closed already. A zeroed struct has fd 0,
	 * which is not ours to close. */
	if (!disk->ops)
		return;
	if (disk->ops->close)
		disk->ops->close(disk);
	disk_file_close(disk);
}

int disk_check_io(const struct disk *disk, const struct iovec *iov, int iovcnt,
		  uint64_t offset, uint64_t *len)
{
	uint64_t total = 0, end;

	if (iovcnt < 0 || (iovcnt > 0 && !iov))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++)
		if (__builtin_add_overflow(total, (uint64_t)iov[i].iov_len, &total))
			return -EINVAL;
	if (__builtin_add_overflow(offset, total, &end) || end > disk->size)
		return -EINVAL;
	*len = total;
	return 0;
}

int disk_pread_full(int fd, void *buf, size_t len, uint64_t offset)
{
	struct iovec iov = { buf, len };

	return disk_xfer(fd, &iov, 1, offset, false);
}

/* `done` counts bytes already moved in iov[i]: a transfer that stopped
 * inside an iovec resumes with a plain pread/pwrite of its rest, so the
 * caller's const array is never modified. */
int disk_xfer(int fd, const struct iovec *iov, int iovcnt, uint64_t offset, bool write)
{
	size_t done = 0;
	int i = 0;

	while (i < iovcnt) {
		size_t left;
		ssize_t n;

		if (done == iov[i].iov_len) {
			i++;
			done = 0;
			continue;
		}
		if (done) {
			uint8_t *p = (uint8_t *)iov[i].iov_base + done;

			n = write ? pwrite(fd, p, iov[i].iov_len - done, (off_t)offset)
				  : pread(fd, p, iov[i].iov_len - done, (off_t)offset);
		} else {
			int cnt = iovcnt - i < IOV_MAX ? iovcnt - i : IOV_MAX;

			n = write ? pwritev(fd, &iov[i], cnt, (off_t)offset)
				  : preadv(fd, &iov[i], cnt, (off_t)offset);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* A read at end of file: the image shrank under us. A write of
		 * nothing would loop forever; neither may pass for success. */
		if (n == 0)
			return -EIO;
		offset += (uint64_t)n;
		for (left = (size_t)n; left && i < iovcnt;) {
			size_t room = iov[i].iov_len - done;

			if (left < room) {
				done += left;
				left = 0;
			} else {
				left -= room;
				i++;
				done = 0;
			}
		}
	}
	return 0;
}
