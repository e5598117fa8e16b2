/* sni.c - the server name in a TLS ClientHello (RFC 8446 4.1.2, RFC 6066 3): every length checked against what holds it. */
#include "net/sni.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define TLS_HANDSHAKE    22
#define HS_CLIENT_HELLO  1
#define EXT_SERVER_NAME  0
#define SNI_HOST_NAME    0

/* A bounded reader: every take checks the bytes are there. */
struct rd {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static const uint8_t *take(struct rd *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || n > r->left) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return p;
}

static unsigned get_n(struct rd *r, size_t n)
{
	const uint8_t *p = take(r, n);
	unsigned v = 0;

	for (size_t i = 0; p && i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* A sub-reader over the next n bytes (a length-prefixed vector). */
static struct rd sub(struct rd *r, size_t n)
{
	const uint8_t *p = take(r, n);

	return (struct rd){ .p = p, .left = p ? n : 0, .bad = !p };
}

static int fail(const char **why, const char *msg)
{
	*why = msg;
	return -EINVAL;
}

/* The server_name extension's body: exactly one host_name. */
static int server_name(struct rd *ext, char sni[NET_HOST_MAX + 1], const char **why)
{
	struct rd list = sub(ext, get_n(ext, 2));
	bool found = false;

	if (ext->bad || ext->left || !list.left)
		return fail(why, "a malformed server_name extension");
	while (list.left) {
		unsigned type = get_n(&list, 1);
		struct rd name = sub(&list, get_n(&list, 2));

		if (list.bad)
			return fail(why, "a server name longer than its list");
		if (type != SNI_HOST_NAME)
			continue;                       /* no other type is defined; skipped */
		if (found)
			return fail(why, "two host names in server_name");
		if (!name.left || name.left > NET_HOST_MAX || memchr(name.p, '\0', name.left))
			return fail(why, "a server name of a bad length");
		memcpy(sni, name.p, name.left);
		sni[name.left] = '\0';
		if (!net_host_valid(sni))
			return fail(why, "a server name that is not a host name");
		found = true;
	}
	return found ? 0 : -ENOENT;
}

int net_sni_parse(const uint8_t *buf, size_t len, char sni[NET_HOST_MAX + 1], const char **why)
{
	struct rd rec = { .p = buf, .left = len }, hs, body, exts;
	unsigned type, major, rlen, hlen;
	bool found = false;

	sni[0] = '\0';
	if (len >= 1 && buf[0] != TLS_HANDSHAKE)
		return fail(why, "not a TLS handshake");
	if (len < 5)
		return -EAGAIN;
	type = get_n(&rec, 1);
	major = get_n(&rec, 1);
	get_n(&rec, 1);                                 /* record minor: anything 3.x */
	rlen = get_n(&rec, 2);
	(void)type;
	if (major != 3 || rlen < 4 || rlen > NET_TLS_RECORD_MAX)
		return fail(why, "a bad TLS record header");
	if (rec.left < rlen)
		return -EAGAIN;
	hs = sub(&rec, rlen);
	if (get_n(&hs, 1) != HS_CLIENT_HELLO)
		return fail(why, "not a ClientHello");
	hlen = get_n(&hs, 3);
	if (hlen > hs.left)
		return fail(why, "a ClientHello split over several records");
	if (hlen < hs.left)
		return fail(why, "bytes after the ClientHello in its record");
	body = sub(&hs, hlen);
	if (get_n(&body, 1) != 3)
		return fail(why, "a bad ClientHello version");
	take(&body, 1 + 32);                             /* version minor, random */
	{
		unsigned sid = get_n(&body, 1), cs, comp;

		if (sid > 32)
			return fail(why, "a session id longer than 32 bytes");
		take(&body, sid);
		cs = get_n(&body, 2);
		if (body.bad || cs < 2 || cs % 2)
			return fail(why, "a bad cipher suite list");
		take(&body, cs);
		comp = get_n(&body, 1);
		if (body.bad || comp < 1)
			return fail(why, "a bad compression method list");
		take(&body, comp);
	}
	if (body.bad)
		return fail(why, "a ClientHello cut short");
	if (!body.left)
		return -ENOENT;                          /* no extensions at all */
	exts = sub(&body, get_n(&body, 2));
	if (body.bad || body.left)
		return fail(why, "extensions that do not fill the ClientHello");
	while (exts.left) {
		unsigned etype = get_n(&exts, 2);
		struct rd ext = sub(&exts, get_n(&exts, 2));
		int rc;

		if (exts.bad)
			return fail(why, "an extension longer than the ClientHello");
		if (etype != EXT_SERVER_NAME)
			continue;
		if (found)
			return fail(why, "two server_name extensions");
		rc = server_name(&ext, sni, why);
		if (rc == -ENOENT)
			return fail(why, "a server_name extension without a host name");
		if (rc)
			return rc;
		found = true;
	}
	return found ? 0 : -ENOENT;
}
