/* config.c - struct vm_config: defaults, owned strings and the one set of limits (pure data). */
#include "vm/config.h"
#include "lib/errmsg.h"
#include "snapshot/codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Every string of a config is one of these two (never freed) or a heap
 * copy of its own. */
static const char unset[] = "";
static const char default_kvm_device[] = "/dev/kvm";

void config_init(struct vm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->kernel = cfg->initrd = cfg->cmdline = cfg->cmdline_append = unset;
	cfg->init_cmd = cfg->rootfs = cfg->kvm_device = unset;
	for (unsigned i = 0; i < CONFIG_MAX_DISKS; i++)
		cfg->disks[i].path = unset;
	cfg->mem_mib = CONFIG_DEFAULT_MEM_MIB;
	cfg->disk_quota = CONFIG_DEFAULT_DISK_QUOTA;
	cfg->cpus = 1;
	cfg->log_level = LOG_WARN;
	cfg->kvm_device = default_kvm_device;
	default_id(cfg);
}

static void drop(const char **field)
{
	if (*field && *field != unset && *field != default_kvm_device)
		free((char *)*field);
	*field = unset;
}

/* Every string field of cfg, for config_free and config_copy. */
static const char **field_at(struct vm_config *cfg, unsigned i)
{
	const char **fields[] = { &cfg->kernel, &cfg->initrd, &cfg->cmdline, &cfg->cmdline_append,
				  &cfg->init_cmd, &cfg->rootfs, &cfg->kvm_device };
	unsigned n = sizeof(fields) / sizeof(fields[0]);

	return i < n ? fields[i] : i < n + CONFIG_MAX_DISKS ? &cfg->disks[i - n].path : NULL;
}

void config_free(struct vm_config *cfg)
{
	const char **f;

	for (unsigned i = 0; (f = field_at(cfg, i)) != NULL; i++)
		drop(f);
}

int config_set(const char **field, const char *src, size_t max)
{
	size_t n = strlen(src);
	char *copy = NULL;

	if (n >= max)
		return -ENAMETOOLONG;
	if (n && !(copy = strdup(src)))
		return -ENOMEM;
	drop(field);
	*field = copy ? copy : unset;
	return 0;
}

int config_copy(struct vm_config *dst, const struct vm_config *src)
{
	const char **f;

	*dst = *src;
	for (unsigned i = 0; (f = field_at(dst, i)) != NULL; i++)
		*f = unset;
	for (unsigned i = 0; (f = field_at(dst, i)) != NULL; i++) {
		const char *from = *field_at((struct vm_config *)src, i);

		if (config_set(f, from ? from : unset, SIZE_MAX)) {
			config_free(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

bool config_id_valid(const char *id)
{
	return config_name_valid(id, CONFIG_ID_MAX);
}

bool config_name_valid(const char *id, size_t max)
{
	size_t n = strlen(id);

	if (n == 0 || n > max)
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
		why = "vCPU count outside 1 .. " CONFIG_CPUS_LIMIT;
	else if (cfg->nr_disks + (cfg->rootfs[0] ? 1 : 0) + cfg->spare_disks > CONFIG_MAX_DISKS)
		why = "more than 8 disks, the rootfs and spare slots included";
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

/* A string of fewer than max bytes, without a NUL inside, into *field. */
static bool get_str(struct snap_in *in, const char **field, size_t max)
{
	uint32_t n = snap_in_u32(in);
	bool ok;
	char *s;

	if (in->bad || n >= max || n > in->left || !(s = malloc((size_t)n + 1)))
		return false;
	ok = snap_in_get(in, s, n) && !memchr(s, '\0', n);
	s[n] = '\0';
	ok = ok && config_set(field, s, max) == 0;
	free(s);
	return ok;
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
	snap_out_u32(o, cfg->spare_disks);
}

int config_decode(struct vm_config *cfg, const void *data, size_t len, const char **why)
{
	struct snap_in in;
	char err[128];
	int rc = 0;
	bool ok;

	config_init(cfg);
	snap_in_init(&in, data, len);
	ok = get_str(&in, &cfg->kernel, CONFIG_PATH_MAX) &&
	     get_str(&in, &cfg->initrd, CONFIG_PATH_MAX) &&
	     get_str(&in, &cfg->cmdline, CONFIG_CMDLINE_MAX) &&
	     get_str(&in, &cfg->cmdline_append, CONFIG_CMDLINE_MAX) &&
	     get_str(&in, &cfg->init_cmd, CONFIG_CMDLINE_MAX) &&
	     get_str(&in, &cfg->rootfs, CONFIG_PATH_MAX);
	cfg->nr_disks = ok ? snap_in_u32(&in) : 0;
	if (cfg->nr_disks > CONFIG_MAX_DISKS) {
		rc = errmsg_why(why, -EBADMSG, "snapshot config: %u disks", cfg->nr_disks);
		goto err;
	}
	for (unsigned i = 0; ok && i < cfg->nr_disks; i++) {
		ok = get_str(&in, &cfg->disks[i].path, CONFIG_PATH_MAX);
		cfg->disks[i].read_only = snap_in_u32(&in) != 0;
	}
	cfg->mem_mib = snap_in_u64(&in);
	cfg->cpus = snap_in_u32(&in);
	cfg->vsock = snap_in_u32(&in) != 0;
	/* Absent in a snapshot made before --spare-disks: none. */
	cfg->spare_disks = in.left ? snap_in_u32(&in) : 0;
	if (!ok || !snap_in_end(&in))
		rc = errmsg_why(why, -EBADMSG, "snapshot config section is malformed");
	else if (config_check(cfg, err, sizeof(err)))
		rc = errmsg_why(why, -EBADMSG, "snapshot config: %s", err);
	if (!rc)
		return 0;
err:
	config_free(cfg);
	return rc;
}
