/* test_shim_oci.c - a container's config.json and an exec's process spec: what the VM and the process are made of, and every malformed field refused with a line. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "shim/oci.h"

static const char good[] =
	"{\"ociVersion\":\"1.0.2\",\"process\":{\"terminal\":true,\"user\":{\"uid\":1000,"
	"\"gid\":1000,\"additionalGids\":[10,20]},\"args\":[\"sh\",\"-c\",\"echo hi\"],"
	"\"env\":[\"PATH=/bin\",\"A=b=c\"],\"cwd\":\"/home/user\"},\"root\":{\"path\":\"rootfs\","
	"\"readonly\":true},\"hostname\":\"box-1\",\"linux\":{\"resources\":{\"memory\":"
	"{\"limit\":536870913},\"cpu\":{\"quota\":150000,\"period\":100000}}},"
	"\"annotations\":{\"io.mayfly.allow-net\":\"pypi.org,10.0.0.1:80\","
	"\"io.kubernetes.cri.sandbox-id\":\"pod1\",\"io.kubernetes.cri.container-type\":\"sandbox\"}}";

Test(shim_oci, a_whole_config)
{
	struct oci_config c;
	char err[200] = "";

	cr_assert_eq(oci_config_parse(&c, good, strlen(good), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.process.argc, 3);
	cr_assert_str_eq(c.process.argv[2], "echo hi");
	cr_assert_null(c.process.argv[3]);
	cr_assert_eq(c.process.nenv, 2);
	cr_assert_str_eq(c.process.env[1], "A=b=c");
	cr_assert_str_eq(c.process.cwd, "/home/user");
	cr_assert_eq(c.process.uid, 1000);
	cr_assert_eq(c.process.ngroups, 2);
	cr_assert_eq(c.process.groups[1], 20);
	cr_assert(c.process.terminal);
	cr_assert(c.readonly_root);
	cr_assert_str_eq(c.root_path, "rootfs");
	cr_assert_str_eq(c.hostname, "box-1");
	cr_assert_eq(c.nallow_net, 2);
	cr_assert_str_eq(c.allow_net[1], "10.0.0.1:80");
	cr_assert_str_eq(c.sandbox_id, "pod1");
	cr_assert(c.is_sandbox);
	/* 512 MiB and a byte: 513 MiB. 1.5 CPUs: 2 vCPUs. */
	cr_assert_eq(oci_config_mem_mib(&c, 128, 256), 513);
	cr_assert_eq(oci_config_cpus(&c, 16), 2);
	oci_config_free(&c);
}

Test(shim_oci, defaults_without_resources_or_user)
{
	static const char j[] = "{\"process\":{\"args\":[\"true\"]}}";
	struct oci_config c;
	char err[200] = "";

	cr_assert_eq(oci_config_parse(&c, j, strlen(j), err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.process.cwd, "/");
	cr_assert_eq(c.process.uid, 0);
	cr_assert_eq(c.process.nenv, 0);
	cr_assert_null(c.root_path);
	cr_assert_eq(oci_config_mem_mib(&c, 128, 256), 256);
	cr_assert_eq(oci_config_cpus(&c, 16), 1);
	oci_config_free(&c);
}

/* Each of these is refused with a line saying what, never a crash. */
Test(shim_oci, malformed_configs_are_refused)
{
	static const char *const bad[] = {
		"", "[]", "{", "{\"process\":1}", "{}",
		"{\"process\":{}}",
		"{\"process\":{\"args\":[]}}",
		"{\"process\":{\"args\":[1]}}",
		"{\"process\":{\"args\":[\"\"]}}",
		"{\"process\":{\"args\":[\"a\\u0000b\"]}}",
		"{\"process\":{\"args\":[\"x\"],\"env\":[\"NOEQUALS\"]}}",
		"{\"process\":{\"args\":[\"x\"],\"env\":[\"=v\"]}}",
		"{\"process\":{\"args\":[\"x\"],\"cwd\":\"relative\"}}",
		"{\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":-1}}}",
		"{\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":4294967295}}}",
		"{\"process\":{\"args\":[\"x\"],\"user\":{\"username\":\"bob\"}}}",
		"{\"process\":{\"args\":[\"x\"],\"terminal\":\"yes\"}}",
		"{\"process\":{\"args\":[\"x\"]},\"hostname\":\"-bad\"}",
		"{\"process\":{\"args\":[\"x\"]},\"hostname\":\"a.b\"}",
		"{\"process\":{\"args\":[\"x\"]},\"linux\":{\"resources\":{\"memory\":{\"limit\":\"1\"}}}}",
		"{\"process\":{\"args\":[\"x\"]},\"annotations\":{\"io.mayfly.allow-net\":5}}",
		"{\"process\":{\"args\":[\"x\"]},\"root\":\"rootfs\"}",
		"{\"process\":{\"args\":[\"x\"]},\"root\":{\"path\":7}}",
		"{\"process\":{\"args\":[\"x\"]},\"root\":{\"path\":\"\"}}",
		"{\"process\":{\"args\":[\"x\"],\"args\":[\"y\"]}}",   /* a duplicate key */
	};
	struct oci_config c;
	char err[200];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		cr_assert_eq(oci_config_parse(&c, bad[i], strlen(bad[i]), err, sizeof(err)), -EINVAL,
			     "accepted: %s", bad[i]);
		cr_assert_neq(err[0], '\0', "no reason for: %s", bad[i]);
		cr_assert_null(strchr(err, '\n'));
	}
}

Test(shim_oci, counts_are_bounded)
{
	size_t cap = 64 * (OCI_MAX_ARGS + 2);
	char *j = malloc(cap), *p = j;
	struct oci_config c;
	char err[200];

	p += sprintf(p, "{\"process\":{\"args\":[");
	for (int i = 0; i <= OCI_MAX_ARGS; i++)
		p += sprintf(p, "%s\"a\"", i ? "," : "");
	sprintf(p, "]}}");
	cr_assert_eq(oci_config_parse(&c, j, strlen(j), err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "at most"));
	free(j);
}

Test(shim_oci, an_exec_process_spec)
{
	static const char j[] = "{\"args\":[\"sh\",\"-c\",\"echo x\"],\"cwd\":\"/\","
				"\"env\":[\"PATH=/bin\"],\"terminal\":false,\"user\":{\"uid\":0,\"gid\":0}}";
	struct oci_process p;
	char err[200] = "";

	cr_assert_eq(oci_process_parse(&p, j, strlen(j), err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(p.argc, 3);
	cr_assert_not(p.terminal);
	oci_process_free(&p);
	cr_assert_eq(oci_process_parse(&p, "{\"args\":7}", 10, err, sizeof(err)), -EINVAL);
}
