/* config.c - table-driven parser for `mayfly boot` flags, with strict number checks. */
#include "config.h"
#include "base64.h"
#include "x86/layout.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

_Static_assert(CONFIG_CMDLINE_MAX == LAYOUT_CMDLINE_MAX, "one command-line limit");

const char config_usage[] =
	"usage: mayfly boot [--kernel FILE] [options]\n"
	"\n"
	"Boot a microVM and stream its serial console to stdout.\n"
	"\n"
	"  --kernel FILE      vmlinux (ELF), bzImage, or PVH ELF kernel\n"
	"                     (default: the guest kernel tools/build-guest built)\n"
	"  --initrd FILE      initial ramdisk (default with the default kernel: its initramfs)\n"
	"  --cmdline STR      kernel command line (default: \"" CONFIG_DEFAULT_CMDLINE "\")\n"
	"  --cmdline-append STR  add to the kernel command line\n"
	"  --init-cmd CMD     shell command for the guest's init to run (mayfly.cmd=)\n"
	"  --rootfs IMG       boot from an ext4 image as a copy-on-write root (/dev/vda):\n"
	"                     IMG is never written; the guest's writes vanish with the VM\n"
	"  --disk PATH[,ro]   add a raw disk, read-write or read-only (repeatable;\n"
	"                     /dev/vdb, /dev/vdc... after the rootfs)\n"
	"  --mem MIB          guest RAM in MiB (default 256)\n"
	"  --cpus N           vCPUs (default 1, at most 254)\n"
	"  --console          interactive: stdin goes to the guest console (Ctrl-A x quits)\n"
	"  --id ID            VM id shown in log lines (default: a random one)\n"
	"  --kvm-device PATH  KVM device (default /dev/kvm)\n"
	"  --vsock PATH       add a virtio-vsock device (guest CID 3): host programs\n"
	"                     connect to the Unix socket PATH and send \"CONNECT <port>\\n\";\n"
	"                     guest connections to port P reach the socket PATH_P;\n"
	"                     the guest's init starts its agent (mayfly exec, mayfly cp)\n"
	"  -v, --verbose      more log lines on stderr (repeat for debug)\n"
	"  -h, --help         this text\n";

enum opt_kind { OPT_STRING, OPT_U64, OPT_FLAG, OPT_VERBOSE, OPT_HELP };

struct opt {
	const char *name;      /* long name without dashes */
	char short_name;
	enum opt_kind kind;
};

static const struct opt opts[] = {
	{ "kernel", 0, OPT_STRING },   { "initrd", 0, OPT_STRING },
	{ "cmdline-append", 0, OPT_STRING }, { "init-cmd", 0, OPT_STRING },
	{ "cmdline", 0, OPT_STRING },  { "mem", 0, OPT_U64 },
	{ "cpus", 0, OPT_U64 },        { "console", 0, OPT_FLAG },
	{ "id", 0, OPT_STRING },       { "kvm-device", 0, OPT_STRING },
	{ "rootfs", 0, OPT_STRING },   { "disk", 0, OPT_STRING },
	{ "vsock", 0, OPT_STRING },
	{ "verbose", 'v', OPT_VERBOSE }, { "help", 'h', OPT_HELP },
};

/* Decimal only, no sign, no trailing junk, no overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
			return -ERANGE;
	}
	*out = v;
	return 0;
}

static const struct opt *find_opt(const char *arg, const char **inline_val)
{
	*inline_val = NULL;
	if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2]) {
		for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
			if (opts[i].short_name == arg[1])
				return &opts[i];
		return NULL;
	}
	if (strncmp(arg, "--", 2))
		return NULL;
	arg += 2;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		size_t n = strlen(opts[i].name);

		if (strncmp(arg, opts[i].name, n))
			continue;
		if (arg[n] == '\0')
			return &opts[i];
		if (arg[n] == '=') {
			*inline_val = arg + n + 1;
			return &opts[i];
		}
	}
	return NULL;
}

static bool id_valid(const char *id)
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

static void default_id(struct vm_config *cfg)
{
	unsigned v = (unsigned)getpid() * 2654435761u;

	/* Non-blocking: an id needs no entropy guarantee. */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v ^= (unsigned)time(NULL);
	snprintf(cfg->id, sizeof(cfg->id), "%08x", v);
}

static enum config_result fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum config_result fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return CONFIG_ERROR;
}

/* Append src to dst[*len], failing rather than truncating. */
static int append(char *dst, size_t *len, const char *src)
{
	size_t n = strlen(src);

	if (n >= CONFIG_CMDLINE_MAX - *len)
		return -E2BIG;
	memcpy(dst + *len, src, n + 1);
	*len += n;
	return 0;
}

/* Base64 keeps any shell command a single kernel parameter: no spaces or
 * quotes for the kernel's parser to split on. */
static int append_base64(char *dst, size_t *len, const char *src)
{
	size_t n = strlen(src);

	if (BASE64_LEN(n) >= CONFIG_CMDLINE_MAX - *len)
		return -E2BIG;
	*len += base64_encode((const uint8_t *)src, n, dst + *len);
	return 0;
}

/* Each virtio-mmio device is announced to the guest on its command line
 * (CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES): no ACPI or device tree needed. */
static int append_devices(struct vm_config *cfg, size_t *len)
{
	/* The disks, then virtio-vsock in the next slot. */
	unsigned nr = cfg->nr_disks + (cfg->vsock_path ? 1 : 0);

	for (unsigned i = 0; i < nr; i++) {
		char dev[80];

		snprintf(dev, sizeof(dev), " virtio_mmio.device=4K@0x%llx:%u",
			 (unsigned long long)LAYOUT_VIRTIO_ADDR(i), LAYOUT_VIRTIO_IRQ(i));
		if (append(cfg->full_cmdline, len, dev))
			return -E2BIG;
	}
	/* With vsock, the guest's init starts its agent (guest-agent/). */
	if (cfg->vsock_path && append(cfg->full_cmdline, len, " mayfly.agent=1"))
		return -E2BIG;
	if (cfg->rootfs && append(cfg->full_cmdline, len, " root=/dev/vda rw"))
		return -E2BIG;
	return 0;
}

static int compose_cmdline(struct vm_config *cfg)
{
	size_t len = 0;

	cfg->full_cmdline[0] = '\0';
	if (append(cfg->full_cmdline, &len, cfg->cmdline ? cfg->cmdline : CONFIG_DEFAULT_CMDLINE))
		return -E2BIG;
	/* Before --cmdline-append, so the user's root= or device options win. */
	if (append_devices(cfg, &len))
		return -E2BIG;
	if (cfg->cmdline_append && (append(cfg->full_cmdline, &len, " ") ||
				    append(cfg->full_cmdline, &len, cfg->cmdline_append)))
		return -E2BIG;
	if (cfg->init_cmd && (append(cfg->full_cmdline, &len, " mayfly.cmd=") ||
			      append_base64(cfg->full_cmdline, &len, cfg->init_cmd)))
		return -E2BIG;
	return 0;
}

/* --disk PATH[,ro|,rw]: the rootfs slot (0) is filled in by check(). */
static int add_disk(struct vm_config *cfg, const char *val, char *err, size_t errlen)
{
	static const char *const suffixes[] = { ",ro", ",rw" };
	struct disk_config *d;
	size_t n = strlen(val);

	if (cfg->nr_disks + 1 >= CONFIG_MAX_DISKS) {
		fail(err, errlen, "at most %d disks, the rootfs included", CONFIG_MAX_DISKS);
		return -1;
	}
	d = &cfg->disks[++cfg->nr_disks];   /* slot 0 stays for the rootfs */
	d->path = val;
	for (int i = 0; i < 2; i++) {
		if (n > 3 && !strcmp(val + n - 3, suffixes[i])) {
			d->read_only = i == 0;
			d->path = NULL;
			snprintf(cfg->disk_paths[cfg->nr_disks], sizeof(cfg->disk_paths[0]), "%.*s",
				 (int)(n - 3), val);
			if (n - 3 >= sizeof(cfg->disk_paths[0])) {
				fail(err, errlen, "--disk path too long");
				return -1;
			}
			d->path = cfg->disk_paths[cfg->nr_disks];
		}
	}
	if (!*d->path || strchr(d->path, ',')) {
		fail(err, errlen, "bad --disk '%s': want PATH, PATH,ro or PATH,rw", val);
		return -1;
	}
	return 0;
}

/* Slot 0 holds the rootfs, or the disks move down one when there is none. */
static void place_disks(struct vm_config *cfg)
{
	if (cfg->rootfs) {
		cfg->disks[0] = (struct disk_config){ .path = cfg->rootfs, .cow = true };
		cfg->nr_disks++;
		return;
	}
	memmove(&cfg->disks[0], &cfg->disks[1], cfg->nr_disks * sizeof(cfg->disks[0]));
	memset(&cfg->disks[cfg->nr_disks], 0, sizeof(cfg->disks[0]));
}

static enum config_result check(struct vm_config *cfg, char *err, size_t errlen)
{
	if (cfg->mem_mib == 0 || cfg->mem_mib > LAYOUT_MEM_MAX_MIB)
		return fail(err, errlen, "--mem must be between 1 and %llu MiB",
			    (unsigned long long)LAYOUT_MEM_MAX_MIB);
	if (cfg->cpus == 0 || cfg->cpus > CONFIG_MAX_CPUS)
		return fail(err, errlen, "--cpus must be between 1 and %d", CONFIG_MAX_CPUS);
	place_disks(cfg);
	if (compose_cmdline(cfg))
		return fail(err, errlen, "kernel command line is longer than %llu bytes",
			    (unsigned long long)LAYOUT_CMDLINE_MAX - 1);
	return CONFIG_OK;
}

enum config_result config_parse(struct vm_config *cfg, int argc, char *const argv[],
				char *err, size_t errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mem_mib = CONFIG_DEFAULT_MEM_MIB;
	cfg->cpus = 1;
	cfg->log_level = LOG_WARN;
	cfg->kvm_device = "/dev/kvm";
	default_id(cfg);

	for (int i = 0; i < argc; i++) {
		const char *val;
		const struct opt *o = find_opt(argv[i], &val);
		uint64_t num;
		int rc;

		/* -vv, -vvv: several verbosity steps at once. */
		if (!o && argv[i][0] == '-' && strspn(argv[i] + 1, "v") == strlen(argv[i] + 1) &&
		    argv[i][1]) {
			for (size_t k = 1; argv[i][k] && cfg->log_level < LOG_DEBUG; k++)
				cfg->log_level++;
			continue;
		}
		if (!o)
			return fail(err, errlen, "unknown option '%s' (see mayfly boot --help)", argv[i]);
		if (o->kind == OPT_HELP)
			return CONFIG_HELP;
		if (o->kind == OPT_VERBOSE || o->kind == OPT_FLAG) {
			if (val)
				return fail(err, errlen, "option --%s takes no value", o->name);
			if (o->kind == OPT_VERBOSE && cfg->log_level < LOG_DEBUG)
				cfg->log_level++;
			if (o->kind == OPT_FLAG)
				cfg->console = true;
			continue;
		}
		if (!val) {
			if (i + 1 >= argc)
				return fail(err, errlen, "option --%s needs a value", o->name);
			val = argv[++i];
		}
		if (o->kind == OPT_U64) {
			rc = parse_u64(val, &num);
			if (rc)
				return fail(err, errlen, "option --%s: bad number '%s'", o->name, val);
			if (!strcmp(o->name, "mem"))
				cfg->mem_mib = num;
			else
				cfg->cpus = num > CONFIG_MAX_CPUS ? CONFIG_MAX_CPUS + 1 : (unsigned)num;
			continue;
		}
		if (!strcmp(o->name, "kernel"))
			cfg->kernel_path = val;
		else if (!strcmp(o->name, "initrd"))
			cfg->initrd_path = val;
		else if (!strcmp(o->name, "cmdline"))
			cfg->cmdline = val;
		else if (!strcmp(o->name, "cmdline-append"))
			cfg->cmdline_append = val;
		else if (!strcmp(o->name, "init-cmd"))
			cfg->init_cmd = val;
		else if (!strcmp(o->name, "kvm-device"))
			cfg->kvm_device = val;
		else if (!strcmp(o->name, "rootfs")) {
			if (!*val)
				return fail(err, errlen, "--rootfs needs an image path");
			cfg->rootfs = val;
		} else if (!strcmp(o->name, "disk")) {
			if (add_disk(cfg, val, err, errlen))
				return CONFIG_ERROR;
		} else if (!strcmp(o->name, "vsock")) {
			if (!*val || strlen(val) > CONFIG_VSOCK_PATH_MAX)
				return fail(err, errlen, "--vsock needs a socket path of 1-%d bytes",
					    CONFIG_VSOCK_PATH_MAX);
			cfg->vsock_path = val;
		}
		else if (!strcmp(o->name, "id")) {
			if (!id_valid(val))
				return fail(err, errlen, "bad --id '%s': 1-32 of [A-Za-z0-9._-]", val);
			snprintf(cfg->id, sizeof(cfg->id), "%s", val);
		}
	}
	return check(cfg, err, errlen);
}

/* Where tools/build-guest leaves the default guest, in search order. */
static const char *guest_dir_candidates(int i)
{
	switch (i) {
	case 0: return getenv("MAYFLY_GUEST_DIR");
#ifdef MAYFLY_DEV_GUEST_DIR
	case 1: return MAYFLY_DEV_GUEST_DIR;
#endif
#ifdef MAYFLY_INSTALLED_GUEST_DIR
	case 2: return MAYFLY_INSTALLED_GUEST_DIR;
#endif
	default: return NULL;
	}
}

enum config_result config_resolve_defaults(struct vm_config *cfg, char *err, size_t errlen)
{
	const char *slash;

	if (cfg->kernel_path)
		return CONFIG_OK;
	if (config_default_guest_file("vmlinux", cfg->default_kernel, sizeof(cfg->default_kernel)))
		return fail(err, errlen, "no --kernel given and no default guest kernel found "
			    "(build it with tools/build-guest, or set MAYFLY_GUEST_DIR)");
	cfg->kernel_path = cfg->default_kernel;
	/* The initramfs of the same guest: beside the kernel found. */
	slash = strrchr(cfg->default_kernel, '/');
	snprintf(cfg->default_initrd, sizeof(cfg->default_initrd), "%.*s/initramfs.cpio.gz",
		 (int)(slash - cfg->default_kernel), cfg->default_kernel);
	if (!cfg->initrd_path && !cfg->rootfs && access(cfg->default_initrd, R_OK) == 0)
		cfg->initrd_path = cfg->default_initrd;
	return CONFIG_OK;
}

int config_default_guest_file(const char *name, char *out, size_t len)
{
	const char *env = getenv("MAYFLY_GUEST_DIR");

	for (int i = 0; i < 3; i++) {
		const char *dir = guest_dir_candidates(i);

		if (i > 0 && env && *env)
			break;   /* an explicit MAYFLY_GUEST_DIR is the only place looked at */
		if (!dir || !*dir)
			continue;
		snprintf(out, len, "%s/%s", dir, name);
		if (access(out, R_OK) == 0)
			return 0;
	}
	return -ENOENT;
}
