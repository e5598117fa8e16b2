/* guest_fs.c - the guest agent's one-shot file system requests from the host: stat, mkdir, remove. */
#include "serve/guest_fs.h"

#include <errno.h>

/* Send the request built in c->wbuf (len, or a -errno from proto_end). */
static int send_built(struct agent_client *c, int len, uint64_t deadline_ns, char *why,
		      size_t whylen)
{
	int rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);

	return rc ? agent_client_lost(rc, why, whylen) : 0;
}

int guest_fs_stat(struct agent_client *c, const char *path, struct proto_stat *st,
		  uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	struct proto_frame f;
	int rc;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_STAT, id);
	proto_put_str(&w, path);
	rc = send_built(c, proto_end(&w), deadline_ns, why, whylen);
	if (rc)
		return rc;
	rc = agent_client_next(c, id, &f, deadline_ns);
	if (rc)
		return agent_client_lost(rc, why, whylen);
	if (f.type == PROTO_ERROR)
		return agent_client_error(&f, why, whylen);
	if (proto_stat_decode(&f, st)) {
		c->broken = true;
		return agent_client_lost(-EPROTO, why, whylen);
	}
	return 0;
}

int guest_fs_mkdir(struct agent_client *c, const char *path, uint32_t mode, bool parents,
		   uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	int rc;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_MKDIR, id);
	proto_put_str(&w, path);
	proto_put_u32(&w, mode);
	proto_put_u32(&w, parents);
	rc = send_built(c, proto_end(&w), deadline_ns, why, whylen);
	return rc ? rc : agent_client_wait_ok(c, id, deadline_ns, why, whylen);
}

int guest_fs_rename(struct agent_client *c, const char *from, const char *to,
		    uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	int rc;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_RENAME, id);
	proto_put_str(&w, from);
	proto_put_str(&w, to);
	rc = send_built(c, proto_end(&w), deadline_ns, why, whylen);
	return rc ? rc : agent_client_wait_ok(c, id, deadline_ns, why, whylen);
}

int guest_fs_remove(struct agent_client *c, const char *path, bool recursive,
		    uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	int rc;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), PROTO_REMOVE, id);
	proto_put_str(&w, path);
	proto_put_u32(&w, recursive);
	rc = send_built(c, proto_end(&w), deadline_ns, why, whylen);
	return rc ? rc : agent_client_wait_ok(c, id, deadline_ns, why, whylen);
}
