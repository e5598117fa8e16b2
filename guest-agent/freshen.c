/* freshen.c - QUIESCE before a snapshot is taken, FRESHEN after each restore: a copy never shares a clock or a random sequence. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/random.h>

/* struct rand_pool_info with room for the largest seed. */
struct seed_info {
	int entropy_count;          /* bits */
	int buf_size;               /* bytes */
	uint8_t buf[PROTO_SEED_MAX];
};

int quiesce_request(struct conn *c, const struct proto_frame *f)
{
	if (f->payload_len)
		return -EPROTO;
	/* The disk's overlay lives in the VMM: what the page cache holds must
	 * be on the virtio disk before the snapshot copies it. */
	sync();
	c->a->stale = true;
	conn_send_empty(c, PROTO_OK, f->id);
	/* The loop closes every connection (flushing this OK): the snapshot
	 * must hold no live host connection, the VMM keeps none. */
	c->a->quiescing = true;
	/* The proxy's clients are host connections too; the network is each
	 * run's own (the host sends NET again after a restore). */
	net_stop(c->a);
	handover_stop(c->a);
	return 0;
}

/* The guest's wall clock and entropy pool: only where the agent is the
 * guest's (vsock mode); the host tests run it as a plain process. */
static int apply(uint64_t realtime_ns, const uint8_t *seed, uint32_t len, const char **what)
{
	struct timespec ts = { .tv_sec = (time_t)(realtime_ns / 1000000000ULL),
			       .tv_nsec = (long)(realtime_ns % 1000000000ULL) };
	struct seed_info info = { .entropy_count = (int)len * 8, .buf_size = (int)len };
	int fd, rc = 0;

	memcpy(info.buf, seed, len);
	if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
		*what = "clock_settime";
		return -errno;
	}
	fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		*what = "open /dev/urandom";
		return -errno;
	}
	/* Credited, then a reseed: the next getrandom() draws from the new pool. */
	if (ioctl(fd, RNDADDENTROPY, &info) < 0)
		rc = -errno, *what = "RNDADDENTROPY";
	else if (ioctl(fd, RNDRESEEDCRNG) < 0)
		rc = -errno, *what = "RNDRESEEDCRNG";
	close(fd);
	return rc;
}

int freshen_request(struct conn *c, const struct proto_frame *f)
{
	struct proto_reader r;
	const uint8_t *seed;
	const char *what = "";
	uint64_t realtime_ns;
	uint32_t len;
	int rc = 0;

	proto_reader_init(&r, f);
	if (!proto_get_u64(&r, &realtime_ns) || !proto_get_bytes(&r, &seed, &len) || !proto_done(&r))
		return -EPROTO;
	if (len < PROTO_SEED_MIN || len > PROTO_SEED_MAX || realtime_ns / 1000000000ULL > INT64_MAX)
		return -EPROTO;
	if (c->a->owns_guest)
		rc = apply(realtime_ns, seed, len, &what);
	if (rc)
		return conn_send_error(c, f->id, -rc, "%s: %s", what, strerror(-rc));
	c->a->stale = false;
	return conn_send_empty(c, PROTO_OK, f->id);
}

bool freshen_needed(struct conn *c, const struct proto_frame *f)
{
	if (!c->a->stale || f->type == PROTO_HELLO || f->type == PROTO_PING ||
	    f->type == PROTO_FRESHEN)
		return false;
	conn_send_error(c, f->id, EAGAIN, "restored from a snapshot: FRESHEN comes first");
	return true;
}
