/* config.c - struct vm_config: defaults, owned strings and the one set of limits (pure data). */
#include "vm/config.h"
#include "lib/errmsg.h"
#include "snapshot/codec.h"
#include "lib/sparse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static void default_id(struct vm_config *cfg)
{
	unsigned v = (unsigned)getpid() * 2654435761u;

	/* Non-blocking: an id needs no entropy guarantee. */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v ^= (unsigned)time(NULL);
	snprintf(cfg->id, sizeof(cfg->id), "%08x", v);
}

void config_init(struct vm_config *cfg)
{
	/* Path buffers mostly empty: their pages stay unwritten (sparse.h). */
	sparse_zero(cfg, sizeof(*cfg));
	cfg->mem_mib = CONFIG_DEFAULT_MEM_MIB;
	cfg->disk_quota = CONFIG_DEFAULT_DISK_QUOTA;
	cfg->cpus = 1;
	cfg->log_level = LOG_WARN;
	snprintf(cfg->kvm_device, sizeof(cfg->kvm_device), "/dev/kvm");
	default_id(cfg);
}

int config_set(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

bool config_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > CONFIG_ID_MAX)
		return false;
	for (; *id; id++)
		if (!((*id >= 'a' && *id <= 'z') || (*id >= 'A' && *id <= 'Z') ||
		      (*id >= '0' && *id <= '9') || *id == '-' || *id == '_' || *id == '.'))
			return false;
	return true;
}

int config_check(const struct vm_config *cfg, char *err, size_t errlen)
{
	const char *why = NULL;

	if (cfg->mem_mib == 0 || cfg->mem_mib > CONFIG_MAX_MEM_MIB)
		why = "guest RAM outside 1 MiB .. 512 GiB";
	else if (cfg->cpus == 0 || cfg->cpus > CONFIG_MAX_CPUS)
		why = "vCPU count outside 1 .. 254";
	else if (cfg->nr_disks + (cfg->rootfs[0] ? 1 : 0) > CONFIG_MAX_DISKS)
		why = "more than 8 disks, the rootfs included";
	else if (!config_id_valid(cfg->id))
		why = "VM id not 1-32 of [A-Za-z0-9._-]";
	else if (!cfg->kernel[0])
		why = "no kernel";
	else if (cfg->vsock_path[0] && !cfg->vsock)
		why = "a vsock socket path without a vsock device";
	if (!why)
		return 0;
	snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

static void put_str(struct snap_out *o, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);

	snap_out_u32(o, n);
	snap_out_put(o, s, n);
}

/* A string of fewer than cap bytes, without a NUL inside. */
static bool get_str(struct snap_in *in, char *dst, size_t cap)
{
	uint32_t n = snap_in_u32(in);

	if (in->bad || n >= cap || n > in->left)
		return false;
	if (!snap_in_get(in, dst, n) || memchr(dst, '\0', n))
		return false;
	dst[n] = '\0';
	return true;
}

void config_encode(const struct vm_config *cfg, struct snap_out *o)
{
	put_str(o, cfg->kernel);
	put_str(o, cfg->initrd);
	put_str(o, cfg->cmdline);
	put_str(o, cfg->cmdline_append);
	put_str(o, cfg->init_cmd);
	put_str(o, cfg->rootfs);
	snap_out_u32(o, cfg->nr_disks);
	for (unsigned i = 0; i < cfg->nr_disks; i++) {
		put_str(o, cfg->disks[i].path);
		snap_out_u32(o, cfg->disks[i].read_only);
	}
	snap_out_u64(o, cfg->mem_mib);
	snap_out_u32(o, cfg->cpus);
	snap_out_u32(o, cfg->vsock);
}

int config_decode(struct vm_config *cfg, const void *data, size_t len, const char **why)
{
	struct snap_in in;
	char err[128];
	bool ok;

	config_init(cfg);
	snap_in_init(&in, data, len);
	ok = get_str(&in, cfg->kernel, sizeof(cfg->kernel)) &&
	     get_str(&in, cfg->initrd, sizeof(cfg->initrd)) &&
	     get_str(&in, cfg->cmdline, sizeof(cfg->cmdline)) &&
	     get_str(&in, cfg->cmdline_append, sizeof(cfg->cmdline_append)) &&
	     get_str(&in, cfg->init_cmd, sizeof(cfg->init_cmd)) &&
	     get_str(&in, cfg->rootfs, sizeof(cfg->rootfs));
	cfg->nr_disks = ok ? snap_in_u32(&in) : 0;
	if (cfg->nr_disks > CONFIG_MAX_DISKS)
		return errmsg_why(why, -EBADMSG, "snapshot config: %u disks", cfg->nr_disks);
	for (unsigned i = 0; ok && i < cfg->nr_disks; i++) {
		ok = get_str(&in, cfg->disks[i].path, sizeof(cfg->disks[i].path));
		cfg->disks[i].read_only = snap_in_u32(&in) != 0;
	}
	cfg->mem_mib = snap_in_u64(&in);
	cfg->cpus = snap_in_u32(&in);
	cfg->vsock = snap_in_u32(&in) != 0;
	if (!ok || !snap_in_end(&in))
		return errmsg_why(why, -EBADMSG, "snapshot config section is malformed");
	if (config_check(cfg, err, sizeof(err)))
		return errmsg_why(why, -EBADMSG, "snapshot config: %s", err);
	return 0;
}
