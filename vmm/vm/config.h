/* config.h - struct vm_config: the one contract between a front end and the VM builder (pure data). */
#ifndef MAYFLY_VM_CONFIG_H
#define MAYFLY_VM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/log.h"

/* One set of limits, checked by every front end (cli.c) and by config_check. */
#define CONFIG_DEFAULT_MEM_MIB  256
#define CONFIG_MAX_MEM_MIB      (512ULL * 1024)   /* 512 GiB */
/* The guest's base command line, and the default kernel's file name in
 * tools/build-guest's directory: a mayfly runs guests of its own machine. */
#if defined(__aarch64__)
#define CONFIG_DEFAULT_CMDLINE  "console=ttyS0 panic=-1 quiet"
#define CONFIG_DEFAULT_KERNEL   "Image"
#define CONFIG_KERNEL_FORMATS   "an arm64 Image (Linux's arm64 boot protocol)"
#define CONFIG_MAX_CPUS         123   /* the GICv3's redistributors: vmm/arm64/cpu.h */
#else
#define CONFIG_DEFAULT_CMDLINE  "console=ttyS0 reboot=k panic=-1 tsc=reliable no_timer_check quiet"
#define CONFIG_DEFAULT_KERNEL   "vmlinux"
#define CONFIG_KERNEL_FORMATS   "vmlinux (ELF), bzImage, or PVH ELF kernel"
#define CONFIG_MAX_CPUS         254   /* xAPIC ids 0..253; the IOAPIC takes the next id */
#endif
/* CONFIG_MAX_CPUS as a string, for the help text and config_check's message. */
#define CONFIG_STR_(x)          #x
#define CONFIG_STR(x)           CONFIG_STR_(x)
#define CONFIG_CPUS_LIMIT       CONFIG_STR(CONFIG_MAX_CPUS)
#define CONFIG_ID_MAX           32
#define CONFIG_CMDLINE_MAX      2048  /* with the NUL: Linux x86's COMMAND_LINE_SIZE */
#define CONFIG_MAX_DISKS        8     /* virtio-blk devices vda..vdh, the rootfs included */
#define CONFIG_PATH_MAX         4096
#define CONFIG_VSOCK_PATH_MAX   107   /* a Unix socket path: sun_path less its NUL */
#define CONFIG_DEFAULT_DISK_QUOTA (512ULL << 20)   /* the rootfs overlay, in host RAM */

/* A raw disk (--disk): writes reach the file unless read-only. */
struct disk_config {
	const char *path;
	bool read_only;
};

/* Where the guest's serial console goes. */
enum console_out { CONSOLE_OUT_STDOUT = 0, CONSOLE_OUT_STDERR, CONSOLE_OUT_DISCARD };

/* Everything the builder needs to make a VM. Each string is "" (unset)
 * or the config's own heap copy, set with config_set, bounded by the
 * limits above (CONFIG_PATH_MAX a path, CONFIG_CMDLINE_MAX a command
 * line, both with the NUL); config_copy copies a config whole and
 * config_free gives its strings back. id and vsock_path are small and
 * inline. */
struct vm_config {
	const char *kernel;
	const char *initrd;                       /* "": none */
	const char *cmdline;                      /* "": CONFIG_DEFAULT_CMDLINE */
	const char *cmdline_append;               /* after the builder's own parameters */
	const char *init_cmd;                     /* run by the guest's init (mayfly.cmd=) */
	const char *rootfs;                       /* "": none; else vda, copy-on-write */
	struct disk_config disks[CONFIG_MAX_DISKS];   /* after the rootfs */
	unsigned nr_disks;
	uint64_t mem_mib;
	unsigned cpus;
	bool console;                 /* interactive: stdin goes to the guest's serial port */
	enum console_out console_out;
	enum log_level log_level;
	char id[CONFIG_ID_MAX + 1];   /* VM id shown in every log line */
	const char *kvm_device;
	bool vsock;                   /* a virtio-vsock device, and the guest starts its agent */
	char vsock_path[CONFIG_VSOCK_PATH_MAX + 1];   /* its Unix socket; "": in-process only */
	uint64_t disk_quota;          /* --disk-quota: bytes the rootfs overlay may hold */
	unsigned spare_disks;         /* --spare-disks: empty virtio-blk slots after the disks */
};

/* Defaults: 256 MiB, one vCPU, /dev/kvm, warnings only, a random id,
 * every other string unset. What cfg held before is not freed: a config
 * in use is config_free'd first. */
void config_init(struct vm_config *cfg);

/* Give back cfg's strings (each is "" after); safe on a zeroed config
 * and on one freed before. */
void config_free(struct vm_config *cfg);

/* dst (not holding strings of its own: fresh, or config_free'd) becomes a
 * copy of src that owns its own strings. 0, or -ENOMEM (dst then holds
 * nothing to free). */
int config_copy(struct vm_config *dst, const struct vm_config *src)
	__attribute__((warn_unused_result));

/* Set a string of a config to a copy of src ("" unsets it), freeing what
 * it held. 0; -ENAMETOOLONG when src has `max` bytes or more (the field
 * untouched); -ENOMEM. */
int config_set(const char **field, const char *src, size_t max)
	__attribute__((warn_unused_result));
#define CONFIG_SET_PATH(field, src)    config_set(&(field), src, CONFIG_PATH_MAX)
#define CONFIG_SET_CMDLINE(field, src) config_set(&(field), src, CONFIG_CMDLINE_MAX)

/* 1-32 of [A-Za-z0-9._-]. */
bool config_id_valid(const char *id);
/* 1-max of [A-Za-z0-9._-] (a container's id: containerd's, up to 76). */
bool config_name_valid(const char *name, size_t max);

/* The limits above, for a config that did not come from the command line
 * (a saved one, a service request). 0, or -EINVAL with err set to one line. */
int config_check(const struct vm_config *cfg, char *err, size_t errlen);

struct snap_out;

/* The config as a snapshot's config section: what makes the VM (not its id,
 * console or log level, which are each run's own), versioned by the state
 * file's format. config_decode refuses a payload that is short,
 * long, has a string without its NUL or too long for its field, or breaks
 * config_check's limits. 0 (cfg then owns its strings), or -EBADMSG
 * with *why (cfg holds nothing to free). */
void config_encode(const struct vm_config *cfg, struct snap_out *o);
int config_decode(struct vm_config *cfg, const void *data, size_t len, const char **why);

#endif
