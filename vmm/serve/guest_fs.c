/* guest_fs.c - the guest agent's one-shot file system requests from the host: stat, mkdir, rename, remove, and the guest's figures (sysinfo). */
#include "serve/guest_fs.h"

#include <errno.h>

/* Send the request built in c->wbuf (len, or a -errno from proto_end). */
static int send_built(struct agent_client *c, int len, uint64_t deadline_ns, char *why,
		      size_t whylen)
{
	int rc = len < 0 ? len : agent_client_send(c, (size_t)len, deadline_ns);

	return rc ? agent_client_lost(rc, why, whylen) : 0;
}

/* A request of type that names a path, and its one reply in *f: 0, or
 * -errno with why (the agent's ERROR, or the connection lost). */
static int path_request(struct agent_client *c, uint8_t type, const char *path,
			struct proto_frame *f, uint64_t deadline_ns, char *why, size_t whylen)
{
	uint32_t id = agent_client_id(c);
	struct proto_writer w;
	int rc;

	why[0] = '\0';
	proto_begin(&w, c->wbuf, sizeof(c->wbuf), type, id);
	proto_put_str(&w, path);
	rc = send_built(c, proto_end(&w), deadline_ns, why, whylen);
	if (rc)
		return rc;
	rc = agent_client_next(c, id, f, deadline_ns);
	if (rc)
		return agent_client_lost(rc, why, whylen);
	return f->type == PROTO_ERROR ? agent_client_error(f, why, whylen) : 0;
}

/* A reply that did not decode: the agent is broken, the call lost. */
static int malformed(struct agent_client *c, char *why, size_t whylen)
{
	c->broken = true;
	return agent_client_lost(-EPROTO, why, whylen);
}

int guest_fs_stat(struct agent_client *c, const char *path, struct proto_stat *st,
		  uint64_t deadline_ns, char *why, size_t whylen)
{
	struct proto_frame f;
	int rc = path_request(c, PROTO_STAT, path, &f, deadline_ns, why, whylen);

	if (!rc && proto_stat_decode(&f, st))
		rc = malformed(c, why, whylen);
	return rc;
}

int guest_fs_stat_if(struct agent_client *c, const char *path, struct proto_stat *st, bool *found,
		     uint64_t deadline_ns, char *why, size_t whylen)
{
	struct proto_frame f = { 0 };
	int rc = path_request(c, PROTO_STAT, path, &f, deadline_ns, why, whylen);

	*found = !rc;
	if (rc && f.type == PROTO_ERROR) {
		why[0] = '\0';   /* the agent said no: the connection goes on */
		return 0;
	}
	if (!rc && proto_stat_decode(&f, st))
		rc = malformed(c, why, whylen);
	return rc;
}

int guest_fs_sysinfo(struct agent_client *c, const char *path, struct proto_sysinfo *si,
		     uint64_t deadline_ns, char *why, size_t whylen)
{
	struct proto_frame f;
	int rc = path_request(c, PROTO_SYSINFO, path, &f, deadline_ns, why, whylen);

	if (!rc && proto_sysinfo_decode(&f, si))
		rc = malformed(c, why, whylen);
	return rc;
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
