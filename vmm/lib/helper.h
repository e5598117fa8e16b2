/* helper.h - a helper process forked before the jail (the approver's spawner, the audit log's writer): its name, its signals, its standard streams. */
#ifndef MAYFLY_LIB_HELPER_H
#define MAYFLY_LIB_HELPER_H

/* In the forked child: named name (ps, /proc/PID/comm), deaf to the
 * terminal's and the shell's signals (Ctrl-C and the like end mayfly,
 * whose end ends the helper at its socket's end of file), no signal
 * blocked, stdin and stdout /dev/null (stderr kept for its lines). 0, or
 * -1 when /dev/null cannot be had (the child should exit). */
int helper_become(const char *name);

#endif
