/* test_net_rules.c - --allow-net and --resolve: strict parsing, matching, and every address range refused unless named. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "net/rules.h"

static struct net_rule parse_ok(const char *text)
{
	struct net_rule r;
	char err[256] = "";

	cr_assert_eq(net_rule_parse(text, &r, err, sizeof(err)), 0, "'%s': %s", text, err);
	return r;
}

Test(net_rules, names_suffixes_ports)
{
	struct net_rule r = parse_ok("PyPI.org");

	cr_assert_eq(r.kind, NET_RULE_HOST);
	cr_assert_str_eq(r.host, "pypi.org");
	cr_assert_eq(r.port, 0);
	r = parse_ok("*.githubusercontent.com");
	cr_assert_eq(r.kind, NET_RULE_SUFFIX);
	cr_assert_str_eq(r.host, "githubusercontent.com");
	r = parse_ok("api.example.com:443");
	cr_assert_eq(r.kind, NET_RULE_HOST);
	cr_assert_eq(r.port, 443);
	r = parse_ok("*.example.com:65535");
	cr_assert_eq(r.port, 65535);
	cr_assert_str_eq(r.text, "*.example.com:65535");
}

Test(net_rules, addresses_and_ranges_v4_v6)
{
	struct net_rule r = parse_ok("127.0.0.1");

	cr_assert_eq(r.kind, NET_RULE_CIDR);
	cr_assert_eq(r.prefix, 128);
	r = parse_ok("10.0.0.0/8:8080");
	cr_assert_eq(r.prefix, 96 + 8);
	cr_assert_eq(r.port, 8080);
	r = parse_ok("fd00::/8");
	cr_assert_eq(r.prefix, 8);
	cr_assert_eq(r.port, 0);
	r = parse_ok("[2001:db8::1]:443");
	cr_assert_eq(r.prefix, 128);
	cr_assert_eq(r.port, 443);
	r = parse_ok("[2001:db8::/32]:80");
	cr_assert_eq(r.prefix, 32);
	r = parse_ok("::1");
	cr_assert_eq(r.prefix, 128);
}

Test(net_rules, bad_rules_each_get_one_line)
{
	static const char *const bad[] = {
		"", "*", "*.", "*.*.com", "a..b", ".a.com", "a.com.", "-", "a b.com", "a.com:0",
		"a.com:65536", "a.com:+80", "a.com:080", "a.com:", ":80", "a.com:80:90", "1.2.3", "-a.com", "a-.com", "a.b-",
		"1.2.3.256", "01.2.3.4", "1.2.3.4/33", "1.2.3.4/", "1.2.3.4/08", "10.0.0.1/8",
		"[::1", "[::1]x", "[::1]:", "[1.2.3.4]:80", "fd00::/129", "fd00::1/8", "ex ample",
		"a\x01.com", "h\xc3\xa9.com", "1.2.3.4:99999",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	};
	struct net_rule r;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		cr_assert_eq(net_rule_parse(bad[i], &r, err, sizeof(err)), -EINVAL, "'%s'", bad[i]);
		cr_assert(err[0] && !strchr(err, '\n'), "'%s': '%s'", bad[i], err);
	}
}

Test(net_rules, a_long_rule_is_refused_not_cut)
{
	char text[1200], err[256];
	struct net_rule r;

	memset(text, 'a', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	cr_assert_eq(net_rule_parse(text, &r, err, sizeof(err)), -EINVAL);
	cr_assert_lt(strlen(err), 200);
}

Test(net_rules, resolve_entries)
{
	struct net_resolve r;
	char err[256];

	cr_assert_eq(net_resolve_parse("Files.Test:127.0.0.1", &r, err, sizeof(err)), 0);
	cr_assert_str_eq(r.host, "files.test");
	cr_assert(net_addr_is_v4(&r.addr));
	cr_assert_eq(net_resolve_parse("v6.test:::1", &r, err, sizeof(err)), 0);
	cr_assert_eq(net_resolve_parse("v6.test:[fd00::5]", &r, err, sizeof(err)), 0);
	cr_assert_eq(net_resolve_parse("files.test", &r, err, sizeof(err)), -EINVAL);
	cr_assert_eq(net_resolve_parse("files.test:", &r, err, sizeof(err)), -EINVAL);
	cr_assert_eq(net_resolve_parse(":1.2.3.4", &r, err, sizeof(err)), -EINVAL);
	cr_assert_eq(net_resolve_parse("files.test:1.2.3", &r, err, sizeof(err)), -EINVAL);
	cr_assert_eq(net_resolve_parse("bad host:1.2.3.4", &r, err, sizeof(err)), -EINVAL);
}

Test(net_rules, policy_limits)
{
	static struct net_policy p;
	char err[256];

	for (unsigned i = 0; i < NET_MAX_RULES; i++)
		cr_assert_eq(net_policy_add_rule(&p, "a.com", err, sizeof(err)), 0);
	cr_assert_eq(net_policy_add_rule(&p, "a.com", err, sizeof(err)), -E2BIG);
	cr_assert_eq(p.nr_rules, NET_MAX_RULES);
}

static struct net_policy *policy(const char *const *rules, size_t n)
{
	static struct net_policy p;
	char err[256];

	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(net_policy_add_rule(&p, rules[i], err, sizeof(err)), 0, "%s", err);
	return &p;
}

Test(net_rules, matching_names_and_ports)
{
	static const char *const rules[] = { "pypi.org", "*.example.com:443", "git.test:8080" };
	struct net_policy *p = policy(rules, 3);

	cr_assert_not_null(net_policy_match(p, "pypi.org", 443));
	cr_assert_not_null(net_policy_match(p, "pypi.org", 22));   /* no port: any */
	cr_assert_null(net_policy_match(p, "files.pypi.org", 443));
	cr_assert_null(net_policy_match(p, "pypi.org.evil", 443));
	cr_assert_not_null(net_policy_match(p, "a.example.com", 443));
	cr_assert_not_null(net_policy_match(p, "a.b.example.com", 443));
	cr_assert_null(net_policy_match(p, "example.com", 443));   /* the suffix itself: no */
	cr_assert_null(net_policy_match(p, "badexample.com", 443));
	cr_assert_null(net_policy_match(p, "a.example.com", 80));
	cr_assert_not_null(net_policy_match(p, "git.test", 8080));
	cr_assert_null(net_policy_match(p, "git.test", 8081));
	/* A name rule never lets an address literal through. */
	cr_assert_null(net_policy_match(p, "127.0.0.1", 443));
}

Test(net_rules, matching_addresses)
{
	static const char *const rules[] = { "127.0.0.1:8443", "10.0.0.0/8", "[fd00::/8]:443" };
	struct net_policy *p = policy(rules, 3);
	struct net_addr a;

	cr_assert_not_null(net_policy_match(p, "127.0.0.1", 8443));
	cr_assert_null(net_policy_match(p, "127.0.0.1", 8444));
	cr_assert_null(net_policy_match(p, "127.0.0.2", 8443));
	cr_assert_not_null(net_policy_match(p, "10.200.3.4", 1));
	cr_assert_null(net_policy_match(p, "11.0.0.1", 1));
	cr_assert_not_null(net_policy_match(p, "fd12::1", 443));
	cr_assert_null(net_policy_match(p, "fe12::1", 443));
	/* The mapped form of a v4 address is that address. */
	cr_assert(net_addr_parse("::ffff:10.1.2.3", &a));
	cr_assert_not_null(net_policy_match_addr(p, &a, 9));
}

/* Which rules may open an address of a refused class: only ranges inside
 * its class; never an unspecified address; a public one through any rule
 * covering it. */
Test(net_rules, only_a_range_inside_a_class_opens_it)
{
	static const struct {
		const char *rule, *addr;
		bool opens;
	} cases[] = {
		{ "0.0.0.0/0", "127.0.0.1", false }, { "0.0.0.0/0", "10.1.2.3", false },
		{ "0.0.0.0/0", "169.254.169.254", false }, { "0.0.0.0/0", "0.0.0.0", false },
		{ "0.0.0.0/0", "8.8.8.8", true }, { "::/0", "::1", false },
		{ "::/0", "::ffff:127.0.0.1", false }, { "::/0", "fd00:ec2::254", false },
		{ "::/0", "2001:db8::1", true }, { "0.0.0.0/1", "127.0.0.1", false },
		{ "64.0.0.0/2", "127.0.0.1", false }, { "127.0.0.0/8", "127.0.0.5", true },
		{ "127.0.0.1", "127.0.0.1", true }, { "10.0.0.0/7", "10.0.0.1", false },
		{ "10.0.0.0/8", "10.9.9.9", true }, { "172.16.0.0/12", "172.31.0.1", true },
		{ "169.254.0.0/16", "169.254.1.1", true },
		{ "169.254.0.0/16", "169.254.169.254", false },
		{ "169.254.169.254", "169.254.169.254", true },
		{ "[fc00::/7]", "fd00:ec2::254", false }, { "[fc00::/7]", "fd12::1", true },
		{ "0.0.0.0", "0.0.0.0", false }, { "[::]", "::", false },
		{ "[::ffff:0:0/96]", "::ffff:127.0.0.1", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct net_policy *p = policy(&cases[i].rule, 1);
		struct net_addr a;

		cr_assert(net_addr_parse(cases[i].addr, &a), "%s", cases[i].addr);
		cr_assert_eq(net_policy_opens(p, &a, 80) != NULL, cases[i].opens, "%s opens %s: %d",
			     cases[i].rule, cases[i].addr, !cases[i].opens);
	}
}

static enum net_class class_of(const char *s)
{
	struct net_addr a;

	cr_assert(net_addr_parse(s, &a), "%s", s);
	return net_addr_class(&a);
}

Test(net_rules, every_refused_range)
{
	static const struct { const char *addr; enum net_class c; } cases[] = {
		{ "0.0.0.0", NET_CLASS_UNSPECIFIED }, { "0.1.2.3", NET_CLASS_UNSPECIFIED },
		{ "127.0.0.1", NET_CLASS_LOOPBACK }, { "127.255.255.254", NET_CLASS_LOOPBACK },
		{ "10.0.0.1", NET_CLASS_PRIVATE }, { "172.16.0.1", NET_CLASS_PRIVATE },
		{ "172.31.255.255", NET_CLASS_PRIVATE }, { "192.168.1.1", NET_CLASS_PRIVATE },
		{ "100.64.0.1", NET_CLASS_PRIVATE }, { "100.127.255.255", NET_CLASS_PRIVATE },
		{ "169.254.0.1", NET_CLASS_LINK_LOCAL }, { "169.254.169.254", NET_CLASS_METADATA },
		{ "224.0.0.1", NET_CLASS_MULTICAST }, { "239.255.255.255", NET_CLASS_MULTICAST },
		{ "240.0.0.1", NET_CLASS_RESERVED }, { "255.255.255.255", NET_CLASS_RESERVED },
		{ "192.0.0.8", NET_CLASS_RESERVED }, { "198.18.0.1", NET_CLASS_RESERVED },
		{ "::", NET_CLASS_UNSPECIFIED }, { "::1", NET_CLASS_LOOPBACK },
		{ "fe80::1", NET_CLASS_LINK_LOCAL }, { "febf::1", NET_CLASS_LINK_LOCAL },
		{ "fc00::1", NET_CLASS_PRIVATE }, { "fdff::1", NET_CLASS_PRIVATE },
		{ "fd00:ec2::254", NET_CLASS_METADATA }, { "ff02::1", NET_CLASS_MULTICAST },
		{ "fec0::1", NET_CLASS_RESERVED },
		/* v4 inside v6: classed by the v4 address they reach */
		{ "::ffff:127.0.0.1", NET_CLASS_LOOPBACK }, { "::ffff:169.254.169.254", NET_CLASS_METADATA },
		{ "::ffff:10.0.0.1", NET_CLASS_PRIVATE }, { "::127.0.0.1", NET_CLASS_LOOPBACK },
		{ "64:ff9b::a9fe:a9fe", NET_CLASS_METADATA }, { "64:ff9b::7f00:1", NET_CLASS_LOOPBACK },
		{ "2002:7f00:1::", NET_CLASS_LOOPBACK }, { "2002:a9fe:a9fe::1", NET_CLASS_METADATA },
		{ "::2", NET_CLASS_RESERVED },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_eq(class_of(cases[i].addr), cases[i].c, "%s: %s, not %s", cases[i].addr,
			     net_class_name(class_of(cases[i].addr)), net_class_name(cases[i].c));
}

Test(net_rules, public_addresses_stay_public)
{
	static const char *const pub[] = { "1.1.1.1", "8.8.8.8", "172.15.255.255", "172.32.0.1",
					   "100.63.255.255", "100.128.0.1", "169.253.1.1",
					   "223.255.255.255", "2606:4700::1111", "2001:db8::1",
					   "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
					   "fe00::1" };

	for (size_t i = 0; i < sizeof(pub) / sizeof(pub[0]); i++)
		cr_assert_eq(class_of(pub[i]), NET_CLASS_PUBLIC, "%s: %s", pub[i],
			     net_class_name(class_of(pub[i])));
}

Test(net_rules, address_text_round_trips)
{
	static const char *const addrs[] = { "127.0.0.1", "fd00:ec2::254", "::1", "10.1.2.3" };
	struct net_addr a;
	char out[46];

	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		cr_assert(net_addr_parse(addrs[i], &a));
		net_addr_format(&a, out);
		cr_assert_str_eq(out, addrs[i]);
	}
	cr_assert_not(net_addr_parse("1.2.3.4.5", &a));
	cr_assert_not(net_addr_parse("0x7f.0.0.1", &a));
	cr_assert_not(net_addr_parse("2130706433", &a));
	cr_assert_not(net_addr_parse("127.1", &a));
}
