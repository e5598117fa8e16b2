/* raw.c - a disk that is a plain image file or block device, read and written in place. */
#include "disk/backend.h"
#include "disk/disk.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

static int raw_readv(struct disk *disk, const struct iovec *iov, int iovcnt, uint64_t offset)
{
	uint64_t len;
	int ret = disk_check_io(disk, iov, iovcnt, offset, &len);

	if (ret)
		return ret;
	return disk_xfer(disk->fd, iov, iovcnt, offset, false);
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
	return disk_xfer(disk->fd, iov, iovcnt, offset, true);
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
