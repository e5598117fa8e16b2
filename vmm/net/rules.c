/* rules.c - the network allow-list: parsing --allow-net and --resolve strictly, matching names and addresses, classing addresses. */
#include "net/rules.h"
#include "lib/errmsg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>


/* ---- addresses ---- */

bool net_addr_is_v4(const struct net_addr *a)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->b, mapped, sizeof(mapped));
}

bool net_addr_parse(const char *s, struct net_addr *a)
{
	struct in_addr v4;

	memset(a, 0, sizeof(*a));
	/* glibc's inet_pton takes only a strict dotted quad (no octal, no
	 * short forms, no leading zeros) and standard v6 text. */
	if (inet_pton(AF_INET, s, &v4) == 1) {
		a->b[10] = a->b[11] = 0xff;
		memcpy(a->b + 12, &v4, 4);
		return true;
	}
	return inet_pton(AF_INET6, s, a->b) == 1;
}

void net_addr_format(const struct net_addr *a, char out[46])
{
	if (net_addr_is_v4(a))
		inet_ntop(AF_INET, a->b + 12, out, 46);
	else
		inet_ntop(AF_INET6, a->b, out, 46);
}

static enum net_class class_v4(const uint8_t *v)
{
	if (v[0] == 0)
		return NET_CLASS_UNSPECIFIED;           /* 0/8: "this network" */
	if (v[0] == 127)
		return NET_CLASS_LOOPBACK;
	if (v[0] == 169 && v[1] == 254)
		return v[2] == 169 && v[3] == 254 ? NET_CLASS_METADATA : NET_CLASS_LINK_LOCAL;
	if (v[0] == 10 || (v[0] == 172 && (v[1] & 0xf0) == 16) || (v[0] == 192 && v[1] == 168) ||
	    (v[0] == 100 && (v[1] & 0xc0) == 64))
		return NET_CLASS_PRIVATE;               /* RFC 1918; 100.64/10 shared (CGN) */
	if ((v[0] == 192 && v[1] == 0 && v[2] == 0) || (v[0] == 198 && (v[1] & 0xfe) == 18))
		return NET_CLASS_RESERVED;              /* 192.0.0/24 protocol; 198.18/15 benchmarks */
	if ((v[0] & 0xf0) == 224)
		return NET_CLASS_MULTICAST;
	if ((v[0] & 0xf0) == 240)
		return NET_CLASS_RESERVED;              /* 240/4 and the broadcast address */
	return NET_CLASS_PUBLIC;
}

enum net_class net_addr_class(const struct net_addr *a)
{
	static const uint8_t zero[12], nat64[12] = { 0, 0x64, 0xff, 0x9b };
	static const uint8_t metadata6[16] = { 0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02 };
	const uint8_t *b = a->b;
	enum net_class c;

	/* Forms that carry a v4 address reach that address: class them by it. */
	if (net_addr_is_v4(a) || !memcmp(b, nat64, 12))
		return class_v4(b + 12);
	if (!memcmp(b, zero, 12)) {
		if (!b[12] && !b[13] && !b[14])
			return b[15] == 0 ? NET_CLASS_UNSPECIFIED :
			       b[15] == 1 ? NET_CLASS_LOOPBACK : NET_CLASS_RESERVED;
		return class_v4(b + 12);                /* ::a.b.c.d, IPv4-compatible */
	}
	if (b[0] == 0x20 && b[1] == 0x02) {             /* 2002::/16, 6to4 */
		c = class_v4(b + 2);
		if (c != NET_CLASS_PUBLIC)
			return c;
	}
	if (!memcmp(b, metadata6, 16))
		return NET_CLASS_METADATA;
	if ((b[0] & 0xfe) == 0xfc)
		return NET_CLASS_PRIVATE;               /* fc00::/7, unique local */
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return NET_CLASS_LINK_LOCAL;            /* fe80::/10 */
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return NET_CLASS_RESERVED;              /* fec0::/10, site-local */
	if (b[0] == 0xff)
		return NET_CLASS_MULTICAST;
	return NET_CLASS_PUBLIC;
}

const char *net_class_name(enum net_class c)
{
	static const char *const names[] = {
		[NET_CLASS_PUBLIC] = "public", [NET_CLASS_UNSPECIFIED] = "unspecified",
		[NET_CLASS_LOOPBACK] = "loopback", [NET_CLASS_PRIVATE] = "private",
		[NET_CLASS_LINK_LOCAL] = "link-local", [NET_CLASS_METADATA] = "cloud metadata",
		[NET_CLASS_MULTICAST] = "multicast", [NET_CLASS_RESERVED] = "reserved",
	};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

static bool in_prefix(const struct net_addr *a, const struct net_addr *net, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a->b, net->b, full))
		return false;
	return !rest || ((a->b[full] ^ net->b[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* ---- names and ports ---- */

bool net_host_valid(char *host)
{
	size_t len = strlen(host), label = 0;
	const char *last;
	bool digits_only = true;

	if (!len || len > NET_HOST_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = host[i];

		if (ch == '.') {
			if (!label || host[i - 1] == '-')
				return false;          /* empty label, a leading or trailing dot or '-' */
			label = 0;
			continue;
		}
		if (ch == '-' && !label)
			return false;

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
			return false;
		if (++label > 63)
			return false;
		if (ch >= 'A' && ch <= 'Z')
			host[i] = (char)(ch - 'A' + 'a');
	}
	if (!label || host[len - 1] == '-')
		return false;
	/* A top-level label is never all digits: "1.2.3.256" is a bad address,
	 * not a name. */
	last = strrchr(host, '.');
	for (const char *p = last ? last + 1 : host; *p; p++)
		digits_only = digits_only && *p >= '0' && *p <= '9';
	return !digits_only;
}

bool net_port_parse(const char *s, size_t n, uint16_t *port)
{
	unsigned v = 0;

	if (!n || n > 5 || s[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return false;
	*port = (uint16_t)v;
	return true;
}

/* ADDR or ADDR/N into a CIDR rule; v6 says which family is expected. */
static int parse_cidr(char *s, bool v6, struct net_rule *r, const char *text, char *err,
		      size_t errlen)
{
	char *slash = strchr(s, '/');
	unsigned max = v6 ? 128 : 32, n = max;
	struct net_addr net;

	if (slash) {
		const char *p = slash + 1;

		*slash = '\0';
		if (!*p || strlen(p) > 3 || (p[0] == '0' && p[1]))
			return errmsg_invalid(err, errlen, "bad --allow-net '%s': bad prefix length", text);
		n = 0;
		for (; *p; p++) {
			if (*p < '0' || *p > '9')
				return errmsg_invalid(err, errlen, "bad --allow-net '%s': bad prefix length", text);
			n = n * 10 + (unsigned)(*p - '0');
		}
		if (n > max)
			return errmsg_invalid(err, errlen, "bad --allow-net '%s': prefix longer than %u", text, max);
	}
	if (!net_addr_parse(s, &net) || (!v6 && !net_addr_is_v4(&net)) ||
	    (v6 && strchr(s, ':') == NULL))
		return errmsg_invalid(err, errlen, "bad --allow-net '%s': '%s' is not an IPv%c address", text, s,
			   v6 ? '6' : '4');
	r->kind = NET_RULE_CIDR;
	r->prefix = v6 ? n : 96 + n;
	r->addr = net;
	/* The network address itself: a range given with host bits set is
	 * most likely a typo, refused rather than guessed. */
	for (unsigned bit = r->prefix; bit < 128; bit++)
		if (net.b[bit / 8] & (0x80 >> (bit % 8)))
			return errmsg_invalid(err, errlen, "bad --allow-net '%s': host bits set past /%u", text,
				   n);
	return 0;
}

int net_rule_parse(const char *text, struct net_rule *r, char *err, size_t errlen)
{
	char buf[NET_RULE_TEXT_MAX];
	char *main = buf, *colon, *port = NULL;
	size_t len = strlen(text);
	int rc;

	memset(r, 0, sizeof(*r));
	if (!len || len >= sizeof(buf))
		return errmsg_invalid(err, errlen, "bad --allow-net '%.64s': want HOST, *.SUFFIX, HOST:PORT, or "
			   "an address or CIDR with an optional :PORT", text);
	memcpy(buf, text, len + 1);
	memcpy(r->text, text, len + 1);
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');

		if (!close || (close[1] && close[1] != ':'))
			return errmsg_invalid(err, errlen, "bad --allow-net '%s': want [IPV6] or [IPV6]:PORT", text);
		*close = '\0';
		main = buf + 1;
		if (close[1])
			port = close + 2;
		rc = parse_cidr(main, true, r, text, err, errlen);
	} else if ((colon = strchr(buf, ':')) && strchr(colon + 1, ':')) {
		rc = parse_cidr(main, true, r, text, err, errlen);   /* bare IPv6: no port */
	} else {
		if (colon) {
			*colon = '\0';
			port = colon + 1;
		}
		if (strchr(main, '/') || strspn(main, "0123456789.") == strlen(main)) {
			rc = parse_cidr(main, false, r, text, err, errlen);
		} else {
			bool suffix = main[0] == '*' && main[1] == '.';
			char *name = suffix ? main + 2 : main;

			if (!net_host_valid(name))
				return errmsg_invalid(err, errlen, "bad --allow-net '%s': '%s' is not a host name "
					   "(labels of 1-63 letters, digits, '-' or '_')", text, main);
			r->kind = suffix ? NET_RULE_SUFFIX : NET_RULE_HOST;
			memcpy(r->host, name, strlen(name) + 1);
			rc = 0;
		}
	}
	if (rc)
		return rc;
	if (port && !net_port_parse(port, strlen(port), &r->port))
		return errmsg_invalid(err, errlen, "bad --allow-net '%s': the port must be 1-65535", text);
	return 0;
}

int net_resolve_parse(const char *text, struct net_resolve *r, char *err, size_t errlen)
{
	const char *colon = strchr(text, ':');
	char addr[64];
	size_t hlen, alen;

	memset(r, 0, sizeof(*r));
	if (!colon)
		return errmsg_invalid(err, errlen, "bad --resolve '%.64s': want HOST:ADDRESS", text);
	hlen = (size_t)(colon - text);
	alen = strlen(colon + 1);
	if (!hlen || hlen > NET_HOST_MAX || !alen || alen >= sizeof(addr))
		return errmsg_invalid(err, errlen, "bad --resolve '%.64s': want HOST:ADDRESS", text);
	memcpy(r->host, text, hlen);
	r->host[hlen] = '\0';
	if (!net_host_valid(r->host))
		return errmsg_invalid(err, errlen, "bad --resolve '%.64s': '%s' is not a host name", text, r->host);
	memcpy(addr, colon + 1, alen + 1);
	if (addr[0] == '[' && alen > 2 && addr[alen - 1] == ']') {
		addr[alen - 1] = '\0';
		memmove(addr, addr + 1, alen - 1);
	}
	if (!net_addr_parse(addr, &r->addr))
		return errmsg_invalid(err, errlen, "bad --resolve '%.64s': '%s' is not an IP address", text, addr);
	return 0;
}

int net_policy_add_rule(struct net_policy *p, const char *text, char *err, size_t errlen)
{
	if (p->nr_rules >= NET_MAX_RULES) {
		snprintf(err, errlen, "at most %d --allow-net", NET_MAX_RULES);
		return -E2BIG;
	}
	if (net_rule_parse(text, &p->rules[p->nr_rules], err, errlen))
		return -EINVAL;
	p->nr_rules++;
	return 0;
}

int net_policy_add_resolve(struct net_policy *p, const char *text, char *err, size_t errlen)
{
	if (p->nr_resolves >= NET_MAX_RESOLVE) {
		snprintf(err, errlen, "at most %d --resolve", NET_MAX_RESOLVE);
		return -E2BIG;
	}
	if (net_resolve_parse(text, &p->resolves[p->nr_resolves], err, errlen))
		return -EINVAL;
	p->nr_resolves++;
	return 0;
}

/* ---- matching ---- */

const struct net_rule *net_policy_match_addr(const struct net_policy *p,
					     const struct net_addr *a, uint16_t port)
{
	for (unsigned i = 0; i < p->nr_rules; i++) {
		const struct net_rule *r = &p->rules[i];

		if (r->kind == NET_RULE_CIDR && (!r->port || r->port == port) &&
		    in_prefix(a, &r->addr, r->prefix))
			return r;
	}
	return NULL;
}

/* The class every address of an address rule's range is in, or -1 when
 * the range spans more than one (0.0.0.0/0 spans them all). A CIDR block is
 * aligned, so its first and last addresses sharing a class means no block
 * of another non-public class lies between them but ones inside that
 * class (fd00:ec2::254 inside fc00::/7), which the caller's equality with
 * the address's own class keeps out. */
static int rule_class(const struct net_rule *r)
{
	struct net_addr last = r->addr;
	enum net_class first;

	for (unsigned bit = r->prefix; bit < 128; bit++)
		last.b[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
	first = net_addr_class(&r->addr);
	return first == net_addr_class(&last) ? (int)first : -1;
}

const struct net_rule *net_policy_opens(const struct net_policy *p, const struct net_addr *a,
					uint16_t port)
{
	enum net_class c = net_addr_class(a);

	if (c == NET_CLASS_UNSPECIFIED)
		return NULL;   /* 0.0.0.0, ::, 0/8: the host itself, whatever a rule says */
	for (unsigned i = 0; i < p->nr_rules; i++) {
		const struct net_rule *r = &p->rules[i];

		if (r->kind == NET_RULE_CIDR && (!r->port || r->port == port) &&
		    in_prefix(a, &r->addr, r->prefix) && (c == NET_CLASS_PUBLIC || rule_class(r) == (int)c))
			return r;
	}
	return NULL;
}

const struct net_rule *net_policy_match(const struct net_policy *p, const char *host,
					uint16_t port)
{
	size_t hlen = strlen(host);
	struct net_addr a;

	if (net_addr_parse(host, &a))
		return net_policy_match_addr(p, &a, port);
	for (unsigned i = 0; i < p->nr_rules; i++) {
		const struct net_rule *r = &p->rules[i];
		size_t slen = strlen(r->host);

		if (r->port && r->port != port)
			continue;
		if (r->kind == NET_RULE_HOST && !strcmp(r->host, host))
			return r;
		if (r->kind == NET_RULE_SUFFIX && hlen > slen + 1 && host[hlen - slen - 1] == '.' &&
		    !strcmp(host + hlen - slen, r->host))
			return r;
	}
	return NULL;
}

const struct net_resolve *net_policy_resolve(const struct net_policy *p, const char *host)
{
	for (unsigned i = 0; i < p->nr_resolves; i++)
		if (!strcmp(p->resolves[i].host, host))
			return &p->resolves[i];
	return NULL;
}
