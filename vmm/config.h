/* config.h - the command line of `mayfly boot`, parsed into a VM configuration (pure: no I/O). */
#ifndef MAYFLY_CONFIG_H
#define MAYFLY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define CONFIG_DEFAULT_MEM_MIB  256
#define CONFIG_MAX_CPUS         254   /* xAPIC ids 0..253; the IOAPIC takes the next id */
#define CONFIG_DEFAULT_CMDLINE  "console=ttyS0 reboot=k panic=-1 tsc=reliable no_timer_check quiet"
#define CONFIG_ID_MAX           32
#define CONFIG_CMDLINE_MAX      2048  /* = LAYOUT_CMDLINE_MAX, with the NUL */
#define CONFIG_MAX_DISKS        8     /* virtio-blk devices: vda..vdh */
#define CONFIG_VSOCK_PATH_MAX   107   /* a Unix socket path: sun_path less its NUL */

/* One virtio-blk device. The rootfs is always the first (vda). */
struct disk_config {
	const char *path;
	bool read_only;               /* --disk PATH,ro */
	bool cow;                     /* --rootfs: base read-only, writes private to the VM */
};

/* Where the guest's serial console goes. */
enum console_out { CONSOLE_OUT_STDOUT = 0, CONSOLE_OUT_STDERR, CONSOLE_OUT_DISCARD };

struct vm_config {
	const char *kernel_path;
	const char *initrd_path;
	const char *cmdline;          /* --cmdline, NULL: CONFIG_DEFAULT_CMDLINE */
	const char *cmdline_append;   /* --cmdline-append */
	const char *init_cmd;         /* --init-cmd: passed base64 as mayfly.cmd= */
	const char *rootfs;           /* --rootfs: copy-on-write root, root=/dev/vda */
	struct disk_config disks[CONFIG_MAX_DISKS];  /* rootfs first, then each --disk */
	unsigned nr_disks;
	char disk_paths[CONFIG_MAX_DISKS][4096];     /* --disk paths without ",ro" */
	char full_cmdline[CONFIG_CMDLINE_MAX];      /* what the guest gets: all three joined */
	char default_kernel[4096];    /* storage for the resolved default paths */
	char default_initrd[4096];
	uint64_t mem_mib;
	unsigned cpus;
	bool console;                 /* interactive: stdin goes to the guest's serial port */
	enum console_out console_out; /* not a flag: mayfly run sets it */
	enum log_level log_level;
	char id[CONFIG_ID_MAX + 1];   /* VM id shown in every log line */
	const char *kvm_device;
	const char *vsock_path;       /* --vsock: virtio-vsock, host side on this Unix socket */
};

enum config_result {
	CONFIG_OK = 0,
	CONFIG_HELP = 1,     /* --help: print usage, exit 0 */
	CONFIG_ERROR = -1,   /* err holds a one-line reason */
};

/* Parse the arguments after "boot" (argv[0] is the first flag). Strings in
 * cfg point into argv. On CONFIG_ERROR, err holds one line without a
 * trailing newline. Accepts both "--flag value" and "--flag=value". */
enum config_result config_parse(struct vm_config *cfg, int argc, char *const argv[],
				char *err, size_t errlen);

/* Fill in the default guest kernel and initrd when --kernel is not given:
 * $MAYFLY_GUEST_DIR when set (and then nothing else), else the source
 * tree's .cache/guest (a development build), then the installed data dir; each holds vmlinux and
 * initramfs.cpio.gz (not used with --rootfs: the root is the disk). The only
 * function here that touches the file system. */
enum config_result config_resolve_defaults(struct vm_config *cfg, char *err, size_t errlen);

/* Find `name` (e.g. "rootfs.ext4") in the default guest directories, in
 * the order config_resolve_defaults uses. 0 with out filled, or -ENOENT. */
int config_default_guest_file(const char *name, char *out, size_t len);

/* The usage text for `mayfly boot`. */
extern const char config_usage[];

#endif
