/* test_net_audit.c - one audit record per proxied connection attempt: queued without waiting, written in order to a real hash-chained log, room kept for every open connection. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/net_audit.h"

static char path[64];
static struct audit_log log_;
static struct net_audit na;

static void setup(void)
{
	char err[256];
	int fd;

	snprintf(path, sizeof(path), "/tmp/net-audit-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(audit_open(&log_, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(net_audit_start(&na, &log_, "vm-1", true), 0);
}

static void teardown(void)
{
	net_audit_stop(&na);
	audit_close(&log_);
	unlink(path);
}

Test(net_audit, every_attempt_is_a_record_in_the_chain, .init = setup, .fini = teardown)
{
	struct net_outcome ok = { .vm_id = "vm-1", .method = "CONNECT", .host = "files.test",
				  .port = 443, .addr = "127.0.0.1", .allowed = true,
				  .rule = "files.test:443", .reason = "", .bytes_up = 517,
				  .bytes_down = 4096 };
	struct net_outcome no = { .vm_id = "vm-1", .method = "GET", .host = "evil.test", .port = 80,
				  .addr = "", .allowed = false, .rule = "",
				  .reason = "evil.test port 80 is not allowed by any --allow-net rule" };
	struct audit_verdict v;
	char line[4096];
	FILE *f;
	int n = 0;

	net_audit_record(&na, &ok);
	net_audit_record(&na, &no);
	net_audit_stop(&na);   /* writes what is queued */
	cr_assert_eq(audit_verify(path, NULL, &v), 0, "%s", v.why);
	cr_assert_eq(v.records, 2);
	f = fopen(path, "r");
	while (fgets(line, sizeof(line), f)) {
		n++;
		cr_assert(strstr(line, "\"sandbox\":\"vm-1\"") && strstr(line, "\"caller\":\"net\""), "%s",
			  line);
		if (n == 1)
			cr_assert(strstr(line, "\"outcome\":\"allowed\"") &&
				  strstr(line, "\"host\":\"files.test\"") && strstr(line, "\"port\":443") &&
				  strstr(line, "\"addr\":\"127.0.0.1\"") &&
				  strstr(line, "\"rule\":\"files.test:443\"") &&
				  strstr(line, "\"bytes_up\":517") && strstr(line, "\"bytes_down\":4096"),
				  "%s", line);
		else
			cr_assert(strstr(line, "\"outcome\":\"refused\"") &&
				  strstr(line, "is not allowed by any --allow-net rule"), "%s", line);
	}
	fclose(f);
	cr_assert_eq(n, 2);
}

Test(net_audit, room_is_kept_for_every_open_connection, .init = setup, .fini = teardown)
{
	cr_assert(net_audit_admit(&na, 0));
	cr_assert(net_audit_admit(&na, NET_AUDIT_SLOTS - 1));
	cr_assert_not(net_audit_admit(&na, NET_AUDIT_SLOTS), "no slot left for its record");
}

Test(net_audit, without_a_log_nothing_runs_and_everything_is_admitted)
{
	struct net_audit none;
	struct net_outcome o = { .method = "", .host = "", .addr = "", .rule = "", .reason = "" };

	cr_assert_eq(net_audit_start(&none, NULL, "x", true), 0);
	cr_assert(net_audit_admit(&none, 1000));
	net_audit_record(&none, &o);
	net_audit_stop(&none);
}
