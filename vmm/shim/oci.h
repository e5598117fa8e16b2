/* oci.h - what a container asks for, from its OCI bundle's config.json and an exec's process spec (pure: JSON in, checked data out). */
#ifndef MAYFLY_SHIM_OCI_H
#define MAYFLY_SHIM_OCI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_MAX_ARGS     1024   /* as the guest agent's EXEC (PROTO_MAX_ARGS) */
#define OCI_MAX_ENV      256    /* EXEC_MAX_ENV */
#define OCI_MAX_GROUPS   64
#define OCI_MAX_RULES    64     /* io.mayfly.allow-net entries (NET_MAX_RULES) */
#define OCI_CONFIG_MAX   (4u << 20)   /* config.json larger than this is refused */

/* Annotations the shim reads. */
#define OCI_ANN_ALLOW_NET     "io.mayfly.allow-net"        /* comma-separated --allow-net rules */
#define OCI_ANN_SANDBOX_ID    "io.kubernetes.cri.sandbox-id"
#define OCI_ANN_CONTAINER_TYPE "io.kubernetes.cri.container-type"   /* "sandbox" or "container" */

/* One process: the container's own (config.json's "process") or an
 * exec's. Strings are the struct's own (oci_process_free). */
struct oci_process {
	char **argv;               /* argc entries, NULL-terminated */
	int argc;
	char **env;                /* "K=V", nenv entries, NULL-terminated */
	int nenv;
	char *cwd;                 /* absolute */
	uint32_t uid, gid;
	uint32_t groups[OCI_MAX_GROUPS];
	int ngroups;
	bool terminal;
};

/* A container's config.json, the parts that make its VM and its process. */
struct oci_config {
	struct oci_process process;
	char *hostname;            /* NULL: none given */
	uint64_t memory_limit;     /* linux.resources.memory.limit in bytes; 0: none */
	int64_t cpu_quota;         /* linux.resources.cpu.quota (us); <= 0: none */
	uint64_t cpu_period;       /* linux.resources.cpu.period (us); 0: 100000 */
	char *allow_net[OCI_MAX_RULES];   /* from io.mayfly.allow-net, each its own string */
	int nallow_net;
	char *sandbox_id;          /* io.kubernetes.cri.sandbox-id, or NULL */
	bool is_sandbox;           /* its container-type is "sandbox" */
	char *root_path;           /* root.path: absolute, or relative to the bundle; NULL: none */
	bool readonly_root;        /* root.readonly */
};

/* Parse config.json's text (len bytes). Every field is checked: types,
 * counts (OCI_MAX_*), strings without NUL, an absolute cwd, "K=V" env
 * entries, ids in range, a hostname that is an RFC 1123 label. 0, or
 * -EINVAL with one line in err (oci_config_free is then not needed). */
int oci_config_parse(struct oci_config *c, const char *json, size_t len, char *err, size_t errlen);

/* Read and parse DIR/config.json (a regular file, at most OCI_CONFIG_MAX
 * bytes). 0, -errno (cannot read: err says why), or -EINVAL as above. */
int oci_config_load(struct oci_config *c, const char *bundle_dir, char *err, size_t errlen);
void oci_config_free(struct oci_config *c);

/* An exec's process spec: the JSON of an OCI "process" object (what
 * containerd sends in ExecProcessRequest.spec). 0 or -EINVAL with err. */
int oci_process_parse(struct oci_process *p, const char *json, size_t len, char *err,
		      size_t errlen);
void oci_process_free(struct oci_process *p);

/* An RFC 1123 label: 1-63 of [A-Za-z0-9-], no '-' first or last. */
bool oci_hostname_valid(const char *name);

/* The VM size for c: memory in MiB (the limit rounded up, at least
 * min_mib, default_mib without a limit) and vCPUs (the CPU quota over
 * its period, rounded up, 1 to max_cpus; 1 without a quota). */
uint64_t oci_config_mem_mib(const struct oci_config *c, uint64_t min_mib, uint64_t default_mib);
unsigned oci_config_cpus(const struct oci_config *c, unsigned max_cpus);

#endif
