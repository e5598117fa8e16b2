/* sysinfo.c - SYSINFO: the guest's CPUs, CPU time since boot, memory and the file system holding a path, read where envd reads them (/proc/stat, /proc/meminfo, statvfs). */
#include "agent.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>

/* /proc/stat's first line: user nice system idle iowait irq softirq steal
 * (guest time is inside user already). */
static int cpu_ticks(uint64_t *busy, uint64_t *total)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) : 0;

	if (f)
		fclose(f);
	if (n < 4)
		return -EIO;
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += v[i];
	*busy = *total - v[3] - v[4];
	return 0;
}

/* MemTotal, MemAvailable and Cached, in bytes. */
static int meminfo(struct proto_sysinfo *s)
{
	static const char *const keys[] = { "MemTotal:", "MemAvailable:", "Cached:" };
	uint64_t *vals[] = { &s->mem_total, &s->mem_available, &s->mem_cached };
	char key[64];
	unsigned long long kb;
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned seen = 0;

	if (!f)
		return -errno;
	/* "Key:   N kB" lines; the few without a unit are none of ours. */
	while (fscanf(f, "%63s %llu kB ", key, &kb) == 2)
		for (unsigned i = 0; i < 3; i++)
			if (!strcmp(key, keys[i])) {
				*vals[i] = (uint64_t)kb << 10;
				seen |= 1u << i;
			}
	fclose(f);
	return seen == 7 ? 0 : -EIO;
}

int sysinfo_request(struct conn *c, const struct proto_frame *f)
{
	char path[PROTO_MAX_PATH];
	struct proto_sysinfo s = { 0 };
	struct proto_reader r;
	struct proto_writer w;
	struct statvfs fs;
	int rc;

	proto_reader_init(&r, f);
	if (!proto_get_str(&r, path, sizeof(path)) || !proto_done(&r))
		return -EPROTO;
	if (statvfs(path, &fs) < 0) {
		conn_send_error(c, f->id, errno, "statvfs %s: %s", path, strerror(errno));
		return 0;
	}
	rc = meminfo(&s);
	if (!rc)
		rc = cpu_ticks(&s.cpu_busy, &s.cpu_total);
	if (rc) {
		conn_send_error(c, f->id, -rc, "/proc/meminfo or /proc/stat: %s", strerror(-rc));
		return 0;
	}
	s.cpus = (uint32_t)get_nprocs();
	s.disk_total = (uint64_t)fs.f_blocks * fs.f_frsize;
	s.disk_free = (uint64_t)fs.f_bavail * fs.f_frsize;
	/* A kernel's figures are consistent; these keep the reply decodable. */
	if (s.mem_available > s.mem_total)
		s.mem_available = s.mem_total;
	if (s.mem_cached > s.mem_total)
		s.mem_cached = s.mem_total;
	if (s.disk_free > s.disk_total)
		s.disk_free = s.disk_total;
	conn_begin(c, &w, PROTO_SYSINFO_RESULT, f->id);
	proto_sysinfo_encode(&w, f->id, &s);
	conn_end(c, &w);
	return 0;
}
