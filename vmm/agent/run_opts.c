/* run_opts.c - flags of mayfly run / exec / cp: strict, one clear line per mistake. */
#include "agent/run_opts.h"
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static int parse_num(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Split "A:B" at the colon chosen by `last`; both halves non-empty and the
 * guest half absolute. */
static int split_file(char *arg, bool guest_first, struct run_file *f)
{
	char *colon = guest_first ? strchr(arg, ':') : strrchr(arg, ':');

	if (!colon || colon == arg || !colon[1])
		return -1;
	*colon = '\0';
	f->guest = guest_first ? arg : colon + 1;
	f->local = guest_first ? colon + 1 : arg;
	return f->guest[0] == '/' ? 0 : -1;
}

/* Which flags each mode takes. */
enum { M_RUN = 1, M_EXEC = 2, M_CP = 4 };
static const struct {
	const char *name;
	int modes;
	bool value;
} flags[] = {
	{ "rootfs", M_RUN, true }, { "kernel", M_RUN, true }, { "mem", M_RUN, true },
	{ "cpus", M_RUN, true },   { "id", M_RUN, true },     { "vsock", M_EXEC | M_CP, true },
	{ "timeout", M_RUN | M_EXEC, true }, { "env", M_RUN | M_EXEC, true },
	{ "cwd", M_RUN | M_EXEC, true },     { "stdin", M_RUN | M_EXEC, true },
	{ "put", M_RUN, true },    { "get", M_RUN, true },    { "json", M_RUN | M_EXEC, false },
	{ "tty", M_RUN | M_EXEC, false },
	{ "verbose", M_RUN | M_EXEC | M_CP, false }, { "help", M_RUN | M_EXEC | M_CP, false },
};

static int apply(struct run_opts *o, const char *name, char *val, char *err, size_t errlen)
{
	uint64_t n;

	if (!strcmp(name, "rootfs"))
		o->rootfs = val;
	else if (!strcmp(name, "kernel"))
		o->kernel = val;
	else if (!strcmp(name, "id"))
		o->id = val;
	else if (!strcmp(name, "vsock"))
		o->vsock = val;
	else if (!strcmp(name, "cwd"))
		o->cwd = val;
	else if (!strcmp(name, "stdin"))
		o->stdin_path = val;
	else if (!strcmp(name, "json"))
		o->json = true;
	else if (!strcmp(name, "tty"))
		o->tty = true;
	else if (!strcmp(name, "verbose"))
		o->verbose++;
	else if (!strcmp(name, "mem")) {
		if (parse_num(val, 1ULL << 20, &n) || !n)
			return bad(err, errlen, "bad --mem '%s'", val);
		o->mem_mib = n;
	} else if (!strcmp(name, "cpus")) {
		if (parse_num(val, CONFIG_MAX_CPUS, &n) || !n)
			return bad(err, errlen, "bad --cpus '%s' (1-%d)", val, CONFIG_MAX_CPUS);
		o->cpus = (unsigned)n;
	} else if (!strcmp(name, "timeout")) {
		if (parse_num(val, 7 * 24 * 3600, &n) || !n)
			return bad(err, errlen, "bad --timeout '%s' (seconds, 1 or more)", val);
		o->timeout_s = (unsigned)n;
	} else if (!strcmp(name, "env")) {
		if (!strchr(val, '=') || val[0] == '=')
			return bad(err, errlen, "bad --env '%s': want KEY=VALUE", val);
		if (o->nenv >= RUN_MAX_ENV)
			return bad(err, errlen, "at most %d --env", RUN_MAX_ENV);
		o->env[o->nenv++] = val;
	} else if (!strcmp(name, "put") || !strcmp(name, "get")) {
		bool get = name[0] == 'g';
		int *cnt = get ? &o->nget : &o->nput;

		if (*cnt >= RUN_MAX_FILES)
			return bad(err, errlen, "at most %d --%s", RUN_MAX_FILES, name);
		if (split_file(val, get, get ? &o->gets[*cnt] : &o->puts[*cnt]))
			return bad(err, errlen, "bad --%s '%s': want %s with an absolute guest path",
				   name, val, get ? "GUEST:LOCAL" : "LOCAL:GUEST");
		(*cnt)++;
	}
	return 0;
}

int run_opts_parse(struct run_opts *o, enum run_mode mode, int argc, char **argv, char *err,
		   size_t errlen)
{
	int bit = mode == RUN_MODE_RUN ? M_RUN : mode == RUN_MODE_EXEC ? M_EXEC : M_CP;
	int i;

	memset(o, 0, sizeof(*o));
	o->cpus = 1;
	o->mem_mib = CONFIG_DEFAULT_MEM_MIB;
	for (i = 0; i < argc; i++) {
		char *arg = argv[i], *val = NULL, *eq;
		size_t k;

		if (!strcmp(arg, "--")) {
			i++;
			break;
		}
		if (arg[0] != '-')
			break;               /* the command starts here */
		if (!strcmp(arg, "-v") || !strcmp(arg, "-vv")) {
			o->verbose += (int)strlen(arg) - 1;
			continue;
		}
		if (!strcmp(arg, "-h"))
			return 1;
		if (strncmp(arg, "--", 2))
			return bad(err, errlen, "unknown option '%s'", arg);
		arg += 2;
		eq = strchr(arg, '=');
		for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
			size_t n = eq ? (size_t)(eq - arg) : strlen(arg);

			if (strlen(flags[k].name) == n && !strncmp(arg, flags[k].name, n))
				break;
		}
		if (k == sizeof(flags) / sizeof(flags[0]) || !(flags[k].modes & bit))
			return bad(err, errlen, "unknown option '%s'", argv[i]);
		if (!strcmp(flags[k].name, "help"))
			return 1;
		if (flags[k].value) {
			val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!val)
				return bad(err, errlen, "option --%s needs a value", flags[k].name);
		} else if (eq) {
			return bad(err, errlen, "option --%s takes no value", flags[k].name);
		}
		if (apply(o, flags[k].name, val, err, errlen))
			return -1;
	}
	o->argv = argv + i;
	o->argc = argc - i;
	if (mode == RUN_MODE_CP) {
		if (o->argc != 2)
			return bad(err, errlen, "mayfly cp takes SRC and DST, one of them :GUEST_PATH");
	} else if (o->argc < 1) {
		return bad(err, errlen, "no command given (mayfly %s [options] -- CMD [ARG...])",
			   mode == RUN_MODE_RUN ? "run" : "exec");
	}
	if (mode != RUN_MODE_RUN && !o->vsock)
		return bad(err, errlen, "--vsock PATH is required (the socket of a VM started "
			   "with mayfly boot --vsock PATH)");
	return 0;
}
