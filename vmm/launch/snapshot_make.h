/* snapshot_make.h - a snapshot made: boot, run the setup commands through the agent, quiesce it, save the VM, put it in place (snapshot create, and run's default snapshot). */
#ifndef MAYFLY_LAUNCH_SNAPSHOT_MAKE_H
#define MAYFLY_LAUNCH_SNAPSHOT_MAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "jail/jail.h"
#include "net/rules.h"
#include "vm/config.h"

/* Boot cfg (it must have vsock) in a jail as jc says, run each setup
 * command in the guest (its output on our stderr when show_output),
 * with net's rules (NULL or none: no network) for those commands alone,
 * quiesce the agent (its proxy too: no rule is saved), save the VM into a
 * directory made beside out before the jail (bind-mounted into it), then,
 * outside, make its files ours and put it in out's place. 0, a failed
 * setup command's own exit code, or 125/126 after one line; nothing is
 * left beside out on failure. Jailed (jail.h), this returns in the VM
 * process too: the caller exits with the code. */
int snapshot_make(const struct vm_config *cfg, char *const *setups, int nsetup, const char *out,
		  uint64_t start_ns, bool show_output, const struct jail_config *jc,
		  const struct net_policy *net);

#endif
