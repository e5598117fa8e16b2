/* snapshot_cmd.h - mayfly snapshot create, and the same for mayfly run's default snapshot. */
#ifndef MAYFLY_AGENT_SNAPSHOT_CMD_H
#define MAYFLY_AGENT_SNAPSHOT_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "agent/client.h"
#include "jail/jail.h"

/* `mayfly snapshot create` (argv[0] is "snapshot"). The exit code. */
int cmd_snapshot(struct cli *c, int argc, char **argv, uint64_t start_ns);

/* Complete cli's config for a VM with the agent: the default rootfs and
 * kernel, an in-process vsock device, the console to stderr with -v. 0 or
 * the exit code after one line. */
int snapshot_vm_config(struct vm_config *vm, int verbose);

/* Boot cfg (it must have vsock) in a jail as jc says, run each setup
 * command in the guest (its output on our stderr when show_output),
 * with net's rules (NULL or none: no network) for those commands alone,
 * quiesce the agent (its proxy too: no rule is saved), save the VM into a directory made beside out before
 * the jail (bind-mounted into it), then, outside, make its files ours and
 * put it in out's place. 0, a failed setup command's own exit code, or
 * 125/126 after one line; nothing is left beside out on failure. Jailed
 * (jail.h), this returns in the VM process too: the caller exits with
 * the code. */
int snapshot_make(const struct vm_config *cfg, char *const *setups, int nsetup, const char *out,
		  uint64_t start_ns, bool show_output, const struct jail_config *jc,
		  const struct net_policy *net);

/* QUIESCE on a connected client: the agent syncs the guest's file systems
 * and closes every connection, this one last (then closed here too). 0,
 * or -errno with *why (-EPROTO: refused, e.g. EAGAIN before FRESHEN). */
int snapshot_quiesce(struct agent_client *c, const char **why);

#endif
