/* lifecycle.c - the guest agent's life-cycle requests: FRESHEN with the connect, NET, PORT, QUIESCE before a save. */
#include "agent_client/lifecycle.h"
#include "lib/clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define SEED_BYTES     32
#define QUIESCE_WAIT_S 30
#define NS             1000000000ULL

/* The OK answering request `id` (`name` in messages); rc: its send's
 * failure, if it failed. */
static int wait_ok(struct agent_client *c, uint32_t id, int rc, const char *name,
		   uint64_t deadline_ns, const char **why)
{
	static _Thread_local char msg[160];
	struct proto_frame f;

	if (!rc)
		rc = agent_client_next(c, id, &f, deadline_ns);
	if (!rc) {
		if (f.type == PROTO_OK)
			return 0;
		if (f.type != PROTO_ERROR) {
			snprintf(msg, sizeof(msg), "the guest agent answered %s with something else",
				 name);
			*why = msg;
			return -EPROTO;
		}
		rc = agent_client_error(&f, msg, sizeof(msg));
		*why = msg;
		return rc;
	}
	snprintf(msg, sizeof(msg), rc == -ETIMEDOUT ? "the guest agent did not answer %s in time" :
		 "lost the guest agent during %s", name);
	*why = msg;
	return rc;
}

/* agent_first's builder: FRESHEN, the host's wall clock and fresh random
 * bytes taken on each try; its id into *opaque. */
static int freshen_frame(struct agent_client *c, uint8_t *buf, size_t cap, void *opaque)
{
	uint8_t seed[SEED_BYTES];
	uint32_t *id = opaque;
	struct proto_writer w;
	struct timespec now;
	int len;

	/* getrandom without flags: the host's pool is long since initialised. */
	if (getrandom(seed, sizeof(seed), 0) != sizeof(seed))
		return -EIO;
	*id = agent_client_id(c);
	clock_gettime(CLOCK_REALTIME, &now);
	proto_begin(&w, buf, cap, PROTO_FRESHEN, *id);
	proto_put_u64(&w, (uint64_t)now.tv_sec * NS + (uint64_t)now.tv_nsec);
	proto_put_bytes(&w, seed, sizeof(seed));
	len = proto_end(&w);
	explicit_bzero(seed, sizeof(seed));
	return len;
}

int agent_connect_fresh(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
			uint64_t deadline_ns, int cancel_fd, const char **why)
{
	uint32_t id = 0;
	struct agent_first first = { freshen_frame, &id };
	int rc = agent_client_connect_first(c, dial, dial_opaque, PROTO_AGENT_PORT, &first,
					    deadline_ns, cancel_fd, why);

	if (!rc)
		rc = wait_ok(c, id, 0, "FRESHEN", deadline_ns, why);
	return rc;
}

struct port_first {
	uint16_t port;
	uint32_t id;
};

/* agent_first's builder: PORT {port}. */
static int port_frame(struct agent_client *c, uint8_t *buf, size_t cap, void *opaque)
{
	struct port_first *pf = opaque;
	struct proto_writer w;

	pf->id = agent_client_id(c);
	proto_begin(&w, buf, cap, PROTO_PORT, pf->id);
	proto_put_u32(&w, pf->port);
	return proto_end(&w);
}

int agent_open_with(struct agent_client *c, agent_dial_fn dial, void *dial_opaque,
		    const struct agent_first *first, const uint32_t *id, const char *name,
		    uint64_t deadline_ns, int cancel_fd, const char **why)
{
	int rc = agent_client_connect_first(c, dial, dial_opaque, PROTO_AGENT_PORT, first,
					    deadline_ns, cancel_fd, why);

	if (rc)
		return rc;
	rc = wait_ok(c, *id, 0, name, deadline_ns, why);
	if (rc)
		agent_client_close(c);
	return rc;
}

int agent_open_port(struct agent_client *c, agent_dial_fn dial, void *dial_opaque, uint16_t port,
		    uint64_t deadline_ns, int cancel_fd, const char **why)
{
	struct port_first pf = { .port = port };
	struct agent_first first = { port_frame, &pf };

	return agent_open_with(c, dial, dial_opaque, &first, &pf.id, "PORT", deadline_ns, cancel_fd,
			       why);
}

int agent_tell_net(struct agent_client *c, uint32_t guest_port, uint32_t vsock_port,
		   uint64_t deadline_ns, const char **why)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	int len, rc;

	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_NET, id);
	proto_put_u32(&w, guest_port);
	proto_put_u32(&w, vsock_port);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);
	return wait_ok(c, id, rc, "NET", deadline_ns, why);
}

int agent_quiesce(struct agent_client *c, const char **why)
{
	uint64_t deadline = clock_now_ns() + QUIESCE_WAIT_S * NS;
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct proto_frame f;
	int rc, len;

	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_QUIESCE, id);
	len = proto_end(&w);
	rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline);
	while (!rc) {
		rc = agent_client_recv(c, &f, deadline);
		if (rc == 1 && f.id == id && f.type == PROTO_OK) {
			rc = 0;
			break;
		}
		if (rc == 1 && f.id == id) {
			*why = "the guest agent refused QUIESCE";
			return -EPROTO;
		}
		rc = rc == 1 ? 0 : rc ? rc : -ETIMEDOUT;
	}
	if (rc) {
		*why = "the guest agent did not answer QUIESCE";
		return rc;
	}
	/* Then its end of the connection closes: nothing is in flight. */
	do
		rc = agent_client_recv(c, &f, deadline);
	while (rc == 1);
	if (rc != -EPIPE) {
		*why = "the guest agent did not close its connections after QUIESCE";
		return rc ? rc : -ETIMEDOUT;
	}
	agent_client_close(c);
	return 0;
}
