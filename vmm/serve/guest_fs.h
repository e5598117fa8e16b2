/* guest_fs.h - the guest agent's one-shot file system requests from the host: stat, mkdir, rename, remove, and the guest's figures (sysinfo). */
#ifndef MAYFLY_SERVE_GUEST_FS_H
#define MAYFLY_SERVE_GUEST_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent_client/client.h"

/* lstat the guest's path into *st. 0 or -errno with why (the agent's
 * message when it refused; a frame out of shape is -EPROTO). */
int guest_fs_stat(struct agent_client *c, const char *path, struct proto_stat *st,
		  uint64_t deadline_ns, char *why, size_t whylen);
/* The same, where the agent's refusal (the path gone, say) is no error:
 * 0 with *found false. -errno only when the call itself failed. */
int guest_fs_stat_if(struct agent_client *c, const char *path, struct proto_stat *st, bool *found,
		     uint64_t deadline_ns, char *why, size_t whylen);
/* The guest's CPUs, CPU time, memory, and the file system holding path
 * into *si (checked: figures that cannot be are -EPROTO, the agent broken). */
int guest_fs_sysinfo(struct agent_client *c, const char *path, struct proto_sysinfo *si,
		     uint64_t deadline_ns, char *why, size_t whylen);
/* mkdir (with parents: mkdir -p), the last component exactly `mode`. */
int guest_fs_mkdir(struct agent_client *c, const char *path, uint32_t mode, bool parents,
		   uint64_t deadline_ns, char *why, size_t whylen);
/* rename(2) from to to. */
int guest_fs_rename(struct agent_client *c, const char *from, const char *to,
		    uint64_t deadline_ns, char *why, size_t whylen);
/* Remove a file, or a directory (recursive: with everything in it, never
 * across a symbolic link or a mount). */
int guest_fs_remove(struct agent_client *c, const char *path, bool recursive,
		    uint64_t deadline_ns, char *why, size_t whylen);

#endif
