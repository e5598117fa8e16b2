/* snapshot_cmd.h - mayfly snapshot create, and the same for mayfly run's default snapshot. */
#ifndef MAYFLY_AGENT_SNAPSHOT_CMD_H
#define MAYFLY_AGENT_SNAPSHOT_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "agent/client.h"

/* `mayfly snapshot create` (argv[0] is "snapshot"). The exit code. */
int cmd_snapshot(struct cli *c, int argc, char **argv, uint64_t start_ns);

/* Complete cli's config for a VM with the agent: the default rootfs and
 * kernel, an in-process vsock device, the console to stderr with -v. 0 or
 * the exit code after one line. */
int snapshot_vm_config(struct vm_config *vm, int verbose);

/* Boot cfg (it must have vsock), run each setup command in the guest
 * (its output on our stderr when show_output), quiesce the agent, save
 * the VM into out. 0, a failed setup command's own exit code, or 125/126
 * after one line. */
int snapshot_make(const struct vm_config *cfg, char *const *setups, int nsetup, const char *out,
		  uint64_t start_ns, bool show_output);

/* QUIESCE on a connected client: the agent syncs the guest's file systems
 * and closes every connection, this one last (then closed here too). 0,
 * or -errno with *why (-EPROTO: refused, e.g. EAGAIN before FRESHEN). */
int snapshot_quiesce(struct agent_client *c, const char **why);

#endif
