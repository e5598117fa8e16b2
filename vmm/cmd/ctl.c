/* ctl.c - mayfly pause and mayfly fork: a running VM of boot --vsock saved through its control socket. */
#include "cmd/ctl.h"
#include "control/ctl_client.h"
#include "control/ctl_msg.h"
#include "lib/log.h"

int cmd_ctl(struct cli *c, int argc, char **argv, bool fork)
{
	int code = cli_parse_or_exit(c, fork ? CLI_FORK : CLI_PAUSE, argc, argv, CTL_EXIT_USAGE);

	if (code >= 0)
		return code;
	log_init(c->vm.id, c->vm.log_level);
	return ctl_client_save(c->run.vsock, c->out, fork);
}
