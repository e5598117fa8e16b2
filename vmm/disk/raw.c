/* raw.c - a disk that is a plain image file or block device, read and written in place. */
#include "disk/backend.h"
#include "disk/disk.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

/* Move all of iov at offset, resuming after short transfers and EINTR.
 * `done` counts bytes already moved in iov[i]: a transfer that stopped
 * inside an iovec resumes with a plain pread/pwrite of its rest, so the
 * caller's const array is never modified. */
static int raw_xfer(int fd, const struct iovec *iov, int iovcnt, uint64_t offset, bool write)
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

static int raw_readv(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset)
{
	uint64_t len;
	int ret = disk_check_io(disk, iov, iovcnt, offset, &len);

	if (ret)
		return ret;
	return raw_xfer(disk->fd, iov, iovcnt, offset, false);
}

static int raw_writev(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset)
{
	uint64_t len;
	int ret;

	if (disk->read_only)
		return -EROFS;
	ret = disk_check_io(disk, iov, iovcnt, offset, &len);
	if (ret)
		return ret;
	return raw_xfer(disk->fd, iov, iovcnt, offset, true);
}

static int raw_flush(struct disk *disk)
{
	/* Data only: the size never changes and the mtime is not worth a
	 * journal commit per guest flush. */
	if (!disk->read_only && fdatasync(disk->fd) < 0)
		return -errno;
	return 0;
}

static const struct disk_ops raw_ops = {
	.readv = raw_readv,
	.writev = raw_writev,
	.flush = raw_flush,
	.close = NULL, /* nothing beyond the file, which disk_close closes */
};

int disk_open_raw(struct disk *disk, const char *path, bool read_only, const char **why)
{
	int ret = disk_file_open(disk, path, read_only, why);

	if (ret)
		return ret;
	disk->ops = &raw_ops;
	return 0;
}
