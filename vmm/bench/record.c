/* record.c - mayfly bench's JSON lines, built with jansson: the host, each run, each summary; and a file read back. */
#include "bench/record.h"
#include "lib/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* A one-line file (sysfs), without its newline; "" when unreadable. */
static void file_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (f && fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	if (f)
		fclose(f);
}

/* Keep what JSON strings can carry as text: printable ASCII. */
static json_t *text(const char *s)
{
	char buf[256];
	size_t i;

	for (i = 0; s[i] && i < sizeof(buf) - 1; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
	return json_string(buf);
}

/* THP's setting is the bracketed word of "always [madvise] never". */
static void thp_setting(char *out, size_t len)
{
	char line[128], *a, *b;

	file_line("/sys/kernel/mm/transparent_hugepage/enabled", line, sizeof(line));
	a = strchr(line, '[');
	b = a ? strchr(a, ']') : NULL;
	if (!a || !b) {
		snprintf(out, len, "unknown");
		return;
	}
	*b = '\0';
	snprintf(out, len, "%s", a + 1);
}

/* Is this host itself a VM (the nested harness, a cloud instance)? The
 * CPU's hypervisor flag (x86), or a firmware that names a virtual
 * machine (DMI, or QEMU's device tree on arm64). */
static bool virtualized(const char *flags, const char *vendor, const char *compatible)
{
	return strstr(flags, " hypervisor") || strstr(vendor, "QEMU") || strstr(vendor, "KVM") ||
	       strstr(vendor, "Amazon EC2") || strstr(vendor, "Google") ||
	       strstr(vendor, "Microsoft") || strstr(compatible, "dummy-virt");
}

static json_t *kvm_json(const char *device)
{
	int fd = open(device, O_RDWR | O_CLOEXEC);
	json_t *o;

	if (fd < 0)
		return json_pack("{s:s, s:s}", "device", device, "error", strerror(errno));
	o = json_pack("{s:s, s:i, s:i, s:i}", "device", device, "api_version",
		      ioctl(fd, KVM_GET_API_VERSION, 0), "max_vcpus",
		      ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS), "max_memslots",
		      ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_MEMSLOTS));
	close(fd);
	return o;
}

static json_t *host_json(const struct bench_header *h)
{
	char model[256], flags[4096], vendor[128], product[128], compatible[256], thp[32], mem[64];
	char date[32];
	struct utsname u;
	time_t now = time(NULL);
	struct tm tm;

	if (uname(&u))
		memset(&u, 0, sizeof(u));
	procfs_field("/proc/cpuinfo", "model name", model, sizeof(model));
	if (!model[0]) {   /* arm64 names its cores by implementer and part */
		char impl[32], part[32];

		procfs_field("/proc/cpuinfo", "CPU implementer", impl, sizeof(impl));
		procfs_field("/proc/cpuinfo", "CPU part", part, sizeof(part));
		snprintf(model, sizeof(model), "implementer %s part %s", impl, part);
	}
	procfs_field("/proc/cpuinfo", "flags", flags + 1, sizeof(flags) - 2);
	flags[0] = ' ';
	strcat(flags, " ");
	file_line("/sys/class/dmi/id/sys_vendor", vendor, sizeof(vendor));
	file_line("/sys/class/dmi/id/product_name", product, sizeof(product));
	file_line("/sys/firmware/devicetree/base/compatible", compatible, sizeof(compatible));
	procfs_field("/proc/meminfo", "MemTotal", mem, sizeof(mem));
	thp_setting(thp, sizeof(thp));
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:b, s:o, s:s}",
			 "kernel", text(u.release), "machine", text(u.machine),
			 "cpu_model", text(model), "vendor", text(vendor),
			 "cpus", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "product", text(product),
			 "mem_total", text(mem), "thp", text(thp), "virtualized",
			 virtualized(flags, vendor, compatible), "kvm", kvm_json(h->kvm_device),
			 "date", date);
}

static int put(FILE *f, json_t *o)
{
	char *s;
	int rc = 0;

	if (!o)
		return -ENOMEM;
	s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
	json_decref(o);
	if (!s)
		return -ENOMEM;
	if (fputs(s, f) == EOF || fputc('\n', f) == EOF || fflush(f))
		rc = -EIO;
	free(s);
	return rc;
}

int bench_write_header(FILE *f, const struct bench_header *h)
{
	json_t *args = json_array();

	for (size_t i = 0; h->argv[i] && args; i++)
		if (json_array_append_new(args, text(h->argv[i]))) {
			json_decref(args);
			args = NULL;
		}
	return put(f, json_pack("{s:s, s:i, s:s, s:s, s:i, s:i, s:o, s:o, s:o}", "type", "bench",
				"format", BENCH_FORMAT, "kind", h->kind, "mode", h->mode, "runs",
				h->runs, "warmup", h->warmup, "args", args, "mayfly",
				text(h->version), "host", host_json(h)));
}

int bench_write_sample(FILE *f, const struct bench_sample *s)
{
	json_t *points = json_object(), *exits = json_object();

	for (int p = 0; p < BENCH_POINTS && points; p++)
		if (s->at[p] >= 0 && json_object_set_new(points, bench_point_name(p), json_real(s->at[p]))) {
			json_decref(points);
			points = NULL;
		}
	for (unsigned i = 0; i < s->nexits && exits; i++)
		if (json_object_set_new(exits, s->exits[i].kind, json_integer((json_int_t)s->exits[i].n))) {
			json_decref(exits);
			exits = NULL;
		}
	return put(f, json_pack("{s:s, s:i, s:b, s:b, s:i, s:o, s:f, s:f, s:I, s:I, s:o}", "type",
				"run", "index", s->index, "warmup", s->warmup, "restored",
				s->restored, "exit_code", s->exit_code, "at_ms", points,
				"cpu_user_ms", s->user_ms, "cpu_sys_ms", s->sys_ms, "minflt",
				(json_int_t)s->minflt, "majflt", (json_int_t)s->majflt, "vm_exits",
				exits));
}

int bench_write_summary(FILE *f, const char *of, const char *unit, const struct stats_summary *sum)
{
	return put(f, json_pack("{s:s, s:s, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
				"type", "summary", "of", of, "unit", unit, "n", (json_int_t)sum->n,
				"p50", sum->p50, "p90", sum->p90, "p95", sum->p95, "p99", sum->p99,
				"min", sum->min, "max", sum->max, "mean", sum->mean));
}

int bench_write_density(FILE *f, const struct density_step *before, const struct density_step *st)
{
	return put(f, json_pack("{s:s, s:i, s:f, s:I, s:I, s:I, s:I, s:I, s:i, s:i}", "type",
				"density", "vms", st->n, "restore_ms", st->restore_ms, "pss_kib",
				(json_int_t)st->pss_kib, "mem_available_kib",
				(json_int_t)st->mem_available_kib, "mem_available_before_kib",
				(json_int_t)before->mem_available_kib, "page_tables_kib",
				(json_int_t)st->page_tables_kib, "page_tables_before_kib",
				(json_int_t)before->page_tables_kib, "threads", st->threads, "fds",
				st->fds));
}

int bench_write_answering(FILE *f, unsigned vms, unsigned answering)
{
	return put(f, json_pack("{s:s, s:i, s:i}", "type", "answering", "vms", vms, "answered",
				answering));
}

/* One "run" line into s: every point it names, the rest -1. */
static bool read_sample(json_t *o, struct bench_sample *s)
{
	json_t *at = json_object_get(o, "at_ms"), *v;
	const char *name;

	memset(s, 0, sizeof(*s));
	for (int p = 0; p < BENCH_POINTS; p++)
		s->at[p] = -1;
	if (!json_is_object(at))
		return false;
	json_object_foreach(at, name, v) {
		int p = bench_point_by_name(name);

		if (p < 0)
			continue;   /* a later format's point: compare what both know */
		if (!json_is_number(v) || json_number_value(v) < 0)
			return false;
		s->at[p] = json_number_value(v);
	}
	s->index = (unsigned)json_integer_value(json_object_get(o, "index"));
	s->restored = json_is_true(json_object_get(o, "restored"));
	s->user_ms = json_number_value(json_object_get(o, "cpu_user_ms"));
	s->sys_ms = json_number_value(json_object_get(o, "cpu_sys_ms"));
	s->minflt = (long)json_integer_value(json_object_get(o, "minflt"));
	s->majflt = (long)json_integer_value(json_object_get(o, "majflt"));
	json_object_foreach(json_object_get(o, "vm_exits"), name, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return false;
		bench_add_exits(s, name, (uint64_t)json_integer_value(v));
	}
	return true;
}

int bench_read(const char *path, char *kind, size_t kindlen, struct bench_sample **out,
	       size_t *n, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct bench_sample *s = NULL;
	size_t cap = 0, lineno = 0;
	char *line = NULL;
	size_t linecap = 0;
	bool header = false;
	ssize_t len;

	*out = NULL;
	*n = 0;
	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &linecap, f)) >= 0) {
		json_t *o = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES, NULL);
		const char *type = json_string_value(json_object_get(o, "type"));
		bool ok = type != NULL;

		lineno++;
		if (ok && !strcmp(type, "bench")) {
			ok = json_integer_value(json_object_get(o, "format")) == BENCH_FORMAT &&
			     json_is_string(json_object_get(o, "kind"));
			if (ok)
				snprintf(kind, kindlen, "%s", json_string_value(json_object_get(o, "kind")));
			header = ok;
		} else if (ok && !strcmp(type, "run") && !json_is_true(json_object_get(o, "warmup"))) {
			if (*n == cap) {
				struct bench_sample *more;

				cap = cap ? cap * 2 : 64;
				more = cap <= BENCH_MAX_RUNS ? realloc(s, cap * sizeof(*s)) : NULL;
				if (!more) {
					json_decref(o);
					snprintf(err, errlen, "%s: more than %d runs", path, BENCH_MAX_RUNS);
					goto fail;
				}
				s = more;
			}
			ok = read_sample(o, &s[*n]);
			*n += ok;
		}
		json_decref(o);
		if (!ok || (!header && lineno == 1)) {
			snprintf(err, errlen, "%s:%zu: not a mayfly bench --json line (format %d)", path,
				 lineno, BENCH_FORMAT);
			goto fail;
		}
	}
	if (ferror(f) || !*n) {
		snprintf(err, errlen, "%s: %s", path, ferror(f) ? strerror(errno) : "no measured runs");
		goto fail;
	}
	free(line);
	fclose(f);
	*out = s;
	return 0;
fail:
	free(line);
	free(s);
	fclose(f);
	*n = 0;
	return -1;
}
