/* rules.h - the network allow-list (--allow-net, --resolve): strict parsing, matching, and the address ranges refused unless named. */
#ifndef MAYFLY_NET_RULES_H
#define MAYFLY_NET_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_MAX_RULES     64
#define NET_MAX_RESOLVE   32
#define NET_HOST_MAX      253          /* a DNS name, without a trailing dot */
#define NET_RULE_TEXT_MAX 300          /* a rule as the user wrote it, for logs */

/* An address, v4 held as v6 (::ffff:a.b.c.d) so one comparison serves both. */
struct net_addr {
	uint8_t b[16];
};

enum net_rule_kind {
	NET_RULE_HOST,     /* exactly this name */
	NET_RULE_SUFFIX,   /* *.suffix: any name below it, not the suffix itself */
	NET_RULE_CIDR,     /* an address or a range (a plain address is a /32 or /128) */
};

struct net_rule {
	enum net_rule_kind kind;
	char host[NET_HOST_MAX + 1];   /* HOST, SUFFIX (without "*."): lowercase */
	struct net_addr addr;          /* CIDR: the network, host bits zero */
	unsigned prefix;               /* CIDR: over the 128-bit form (v4: 96 + n) */
	uint16_t port;                 /* 0: any port */
	char text[NET_RULE_TEXT_MAX];  /* as given */
};

/* --resolve HOST:ADDR: HOST resolves to ADDR alone, the host's DNS not asked. */
struct net_resolve {
	char host[NET_HOST_MAX + 1];
	struct net_addr addr;
};

/* A sandbox's network policy, given at each run (never saved in a snapshot).
 * nr_rules 0: no network at all. */
struct net_policy {
	struct net_rule rules[NET_MAX_RULES];
	unsigned nr_rules;
	struct net_resolve resolves[NET_MAX_RESOLVE];
	unsigned nr_resolves;
};

/* Why an address is refused unless a rule names it; NET_CLASS_PUBLIC: it is not. */
enum net_class {
	NET_CLASS_PUBLIC = 0,
	NET_CLASS_UNSPECIFIED,
	NET_CLASS_LOOPBACK,
	NET_CLASS_PRIVATE,        /* RFC 1918, 100.64/10, fc00::/7 */
	NET_CLASS_LINK_LOCAL,     /* 169.254/16, fe80::/10 */
	NET_CLASS_METADATA,       /* 169.254.169.254, fd00:ec2::254 */
	NET_CLASS_MULTICAST,
	NET_CLASS_RESERVED,       /* 240/4, broadcast, site-local fec0::/10 */
};

/* Pure: parse one --allow-net RULE: "host", "*.suffix", "host:port", an IPv4
 * address or CIDR with an optional ":port", an IPv6 address or CIDR, bare or
 * in brackets with ":port" ("[fd00::/8]:443"). Names: 1-253 bytes of labels
 * of 1-63 [A-Za-z0-9_-] (stored lowercase); ports 1-65535. 0, or -EINVAL
 * with err set to one line. */
int net_rule_parse(const char *text, struct net_rule *r, char *err, size_t errlen);

/* Pure: parse one --resolve HOST:ADDR (ADDR v4 or v6, brackets optional).
 * 0, or -EINVAL with err set to one line. */
int net_resolve_parse(const char *text, struct net_resolve *r, char *err, size_t errlen);

/* Add a rule or resolve entry to a policy; -E2BIG past its limit. */
int net_policy_add_rule(struct net_policy *p, const char *text, char *err, size_t errlen);
int net_policy_add_resolve(struct net_policy *p, const char *text, char *err, size_t errlen);

/* Pure: parse an address literal (v4 dotted quad, or v6, no brackets). */
bool net_addr_parse(const char *s, struct net_addr *a);

/* Pure: the address as text (v4 dotted, v6 RFC 5952) in out[46]. */
void net_addr_format(const struct net_addr *a, char out[46]);

/* Pure: whether the address is a v4 one (held as ::ffff:a.b.c.d). */
bool net_addr_is_v4(const struct net_addr *a);

/* Pure: the class of an address. IPv4-mapped (::ffff:0:0/96), IPv4-compatible
 * (::a.b.c.d) and NAT64 (64:ff9b::/96) forms are classed by the v4 address
 * they carry. */
enum net_class net_addr_class(const struct net_addr *a);
const char *net_class_name(enum net_class c);

/* Pure: the first rule allowing HOST (a name, or an address literal: only
 * address rules match those) and PORT; NULL: none does. */
const struct net_rule *net_policy_match(const struct net_policy *p, const char *host,
					uint16_t port);

/* Pure: the first address rule covering ADDR and PORT: a refused class is
 * allowed only through one. NULL: none. */
const struct net_rule *net_policy_match_addr(const struct net_policy *p,
					     const struct net_addr *a, uint16_t port);

/* Pure: the first address rule that may open ADDR and PORT, the broker's
 * check before each connect: a public address by any rule covering it; an
 * address of a refused class only by a rule whose whole range is inside
 * that class (127.0.0.1, 10.0.0.0/8, 169.254.169.254 itself: never
 * 0.0.0.0/0, ::/0, 169.254.0.0/16 for the metadata address, fc00::/7 for
 * fd00:ec2::254); an unspecified address (0.0.0.0, ::, 0/8) by none.
 * NULL: none. */
const struct net_rule *net_policy_opens(const struct net_policy *p, const struct net_addr *a,
					uint16_t port);

/* Pure: the --resolve entry for HOST, or NULL. */
const struct net_resolve *net_policy_resolve(const struct net_policy *p, const char *host);

/* Pure: a port "1".."65535" in s[0, n): digits only, no sign, no leading zero. */
bool net_port_parse(const char *s, size_t n, uint16_t *port);

/* Pure: check and lowercase a host name in place (the rule syntax above). */
bool net_host_valid(char *host);

#endif
