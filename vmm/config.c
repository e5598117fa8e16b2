/* config.c - struct vm_config: defaults, owned strings and the one set of limits (pure data). */
#include "config.h"

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
	memset(cfg, 0, sizeof(*cfg));
	cfg->mem_mib = CONFIG_DEFAULT_MEM_MIB;
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
