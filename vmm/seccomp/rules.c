/* rules.c - the seccomp rule tables per thread role, one line of why per system call; compiled into the generator and the tests. */
#include "seccomp/rules.h"

#include <sys/ioctl.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define GROUP(var, label) { label, var, N(var) }

/* Any arguments. */
#define ALLOW(sc, why) { SYS_##sc, #sc, SECCOMP_ANY, 0, 0, NULL, why }
/* Only with argument `a` equal to the constant v. */
#define ALLOW_EQ(sc, a, v, why) { SYS_##sc, #sc, SECCOMP_ARG_EQ, a, (uint64_t)(v), #v, why }
/* Only with flag bits m clear in argument `a`. */
#define ALLOW_CLEAR(sc, a, m, why) { SYS_##sc, #sc, SECCOMP_ARG_CLEAR, a, (uint64_t)(m), #m, why }
/* ioctl(fd, REQ, ...) for one request number. */
#define IOCTL(req, why) ALLOW_EQ(ioctl, 1, req, why)

/* Every thread: memory, locks, its own end, the kick signal's return, the
 * one line the SIGSYS handler writes. Executable memory for no one. */
static const struct seccomp_rule every_thread[] = {
	ALLOW(futex, "mutexes, condition variables, pthread_join"),
	ALLOW(write, "log lines and the SIGSYS line to stderr; eventfd wake-ups"),
	ALLOW(exit, "a thread's own end (pthread's return)"),
	ALLOW(exit_group, "the SIGSYS handler ends the process; the main thread's exit"),
	ALLOW(rt_sigreturn, "return from the kick signal's handler (THREAD_KICK_SIGNAL)"),
	ALLOW(rt_sigprocmask, "pthread_kill and thread exit mask signals around their work"),
	ALLOW_CLEAR(mmap, 2, PROT_EXEC, "malloc's arenas and large blocks; never executable"),
	ALLOW_CLEAR(mprotect, 2, PROT_EXEC, "malloc grows a thread arena; never executable"),
	ALLOW(munmap, "free of large blocks"),
	ALLOW(mremap, "realloc of large blocks (keeps the protection)"),
	ALLOW(madvise, "free and thread exit give unused pages back"),
	ALLOW(brk, "malloc's main arena"),
	ALLOW(clock_gettime, "timestamps and deadlines, when the vDSO falls back to the kernel"),
	ALLOW(gettimeofday, "the same, for the wall clock"),
	ALLOW(getpid, "pthread_kill's tgkill needs the process id"),
	ALLOW(gettid, "log lines and raise name the thread"),
	ALLOW(sched_yield, "spin waits for a stop reason being written"),
};

/* Threads that make another leave a blocking call (thread_kick):
 * SIGUSR1 and nothing else, so no thread can kill or stop anyone. */
static const struct seccomp_rule kicker[] = {
	ALLOW_EQ(tgkill, 2, SIGUSR1, "thread_kick: SIGUSR1 only (vCPUs out of KVM_RUN, stuck writers)"),
};

/* Waiting on several file descriptors (eventfds, stdin, sockets). */
static const struct seccomp_rule waiter[] = {
#ifdef SYS_poll
	ALLOW(poll, "wait for an fd (stop eventfd, stdin, a socket)"),
#else   /* aarch64 has only the newer form */
	ALLOW(ppoll, "wait for an fd (stop eventfd, stdin, a socket)"),
#endif
	ALLOW(ppoll, "the same, as glibc issues poll"),
	ALLOW(read, "eventfd counters, signalfd, stdin, sockets"),
};

static const struct seccomp_rule main_thread[] = {
	ALLOW(close, "teardown: every fd vm_build opened"),
	ALLOW_EQ(ioctl, 1, TCGETS, "console_stop, term_close: read the terminal's mode"),
	ALLOW_EQ(ioctl, 1, TCSETS, "console_stop, term_close: give the terminal its mode back"),
	ALLOW(rt_sigaction, "term_close puts SIGINT/SIGTERM/SIGHUP/SIGWINCH back to default"),
#ifdef SYS_unlink
	ALLOW(unlink, "boot --vsock: remove its socket at teardown"),
#else   /* aarch64 has only the newer form */
	ALLOW(unlinkat, "boot --vsock: remove its socket at teardown"),
#endif
	ALLOW_EQ(newfstatat, 3, AT_EMPTY_PATH, "stdio's first write to stdout: fstat only, no path"),
	ALLOW_EQ(newfstatat, 3, AT_SYMLINK_NOFOLLOW, "boot --vsock: is its socket still ours (lstat) before unlink"),
	ALLOW(fstat, "the same, older form"),
};

/* A vCPU needs KVM_RUN, and a few calls on the paths a guest's exit can
 * take: interrupt lines (serial, i8042), the fatal-exit dump, the stop. */
static const struct seccomp_rule vcpu[] = {
	IOCTL(KVM_RUN, "run the guest; also the pause's settle with immediate_exit"),
	IOCTL(KVM_IRQ_LINE, "serial and i8042 raise and lower their interrupt lines"),
#if defined(__x86_64__)
	IOCTL(KVM_GET_REGS, "a fatal exit logs RIP"),
#elif defined(__aarch64__)
	IOCTL(KVM_GET_ONE_REG, "a fatal exit logs the pc"),
#endif
};

/* The event loop: virtio queues kicked by ioeventfd, completed by irqfd,
 * the disk files, the vsock connections (Unix sockets) and listener. */
static const struct seccomp_rule io[] = {
#ifdef SYS_epoll_wait
	ALLOW(epoll_wait, "the loop itself"),
#else   /* aarch64 has only the newer form */
	ALLOW(epoll_pwait, "the loop itself"),
#endif
	ALLOW(epoll_pwait, "the same, as glibc may issue it"),
	ALLOW(epoll_ctl, "vsock connections come and go"),
	ALLOW(read, "ioeventfd kicks, vsock sockets"),
	ALLOW(readv, "vsock: socket data into guest buffers"),
	ALLOW(writev, "vsock: guest buffers to a socket"),
	ALLOW(pread64, "virtio-blk reads from the image"),
	ALLOW(pwrite64, "virtio-blk writes (a writable --disk)"),
	ALLOW(preadv, "virtio-blk reads into several buffers"),
	ALLOW(pwritev, "virtio-blk writes from several buffers"),
	ALLOW(fsync, "virtio-blk FLUSH on a writable disk"),
	ALLOW(fdatasync, "the same"),
	ALLOW(accept4, "boot --vsock: a host client connects"),
	ALLOW(close, "a vsock connection ends"),
	ALLOW(shutdown, "vsock half-close passed to the host socket"),
	ALLOW(recvfrom, "vsock: host socket data"),
	ALLOW(sendto, "vsock: data to a host socket (MSG_NOSIGNAL)"),
	ALLOW(recvmsg, "the same, with iovecs"),
	ALLOW(sendmsg, "the same, with iovecs"),
	ALLOW(timerfd_settime, "vsock: the one timerfd armed for the earliest deadline"),
	ALLOW(socketpair, "--allow-net: each proxied guest connection's pair (vsock side, proxy side)"),
};

static const struct seccomp_rule console[] = {
	IOCTL(KVM_IRQ_LINE, "stdin's bytes reach the UART, which raises its interrupt line"),
#ifdef SYS_poll
	ALLOW(poll, "wait for output, stdin or a stop"),
#else   /* aarch64 has only the newer form */
	ALLOW(ppoll, "wait for output, stdin or a stop"),
#endif
	ALLOW(ppoll, "the same, as glibc issues poll"),
	ALLOW(read, "stdin (--console) and the wake eventfd"),
};

static const struct seccomp_rule log_writer[] = {
#ifdef SYS_poll
	ALLOW(poll, "stderr made non-blocking by someone: wait as write would"),
#else   /* aarch64 has only the newer form */
	ALLOW(ppoll, "stderr made non-blocking by someone: wait as write would"),
#endif
	ALLOW(ppoll, "the same, as glibc issues poll"),
};

/* mayfly run's client: the agent over an in-process socket pair, --put
 * and --get files, --stdin, --tty's window size, FRESHEN's entropy. */
static const struct seccomp_rule agent[] = {
	ALLOW(socketpair, "the in-process vsock connection to the agent"),
	ALLOW(epoll_ctl, "that connection joins the I/O thread's loop"),
	ALLOW(close, "connections and files done"),
	ALLOW(shutdown, "half-close of the agent connection"),
	ALLOW(recvfrom, "frames from the agent"),
	ALLOW(sendto, "frames to the agent"),
	ALLOW(recvmsg, "the same"),
	ALLOW(sendmsg, "the same"),
	ALLOW(openat, "--put reads LOCAL; --get writes a temporary file beside LOCAL"),
#ifdef SYS_open
	ALLOW(open, "the same, older form"),
#else   /* aarch64 has only the newer form */
	ALLOW(openat, "the same, older form"),
#endif
	ALLOW(newfstatat, "--get: is LOCAL a regular file; sizes"),
	ALLOW(fstat, "the same"),
	ALLOW(lseek, "file positions"),
	ALLOW(fchmod, "--get: the temporary file gets LOCAL's mode"),
	ALLOW(fsync, "--get: the file is on disk before the rename"),
#ifdef SYS_rename
	ALLOW(rename, "--get: the temporary file replaces LOCAL whole"),
#else   /* aarch64 has only the newer form */
	ALLOW(renameat, "--get: the temporary file replaces LOCAL whole"),
#endif
#ifdef SYS_unlink
	ALLOW(unlink, "--get failed: remove our temporary file"),
#else   /* aarch64 has only the newer form */
	ALLOW(unlinkat, "--get failed: remove our temporary file"),
#endif
	ALLOW(umask, "--get: a new LOCAL gets 0666 less the umask, as open would give it"),
#ifdef SYS_readlink
	ALLOW(readlink, "--get: realpath of LOCAL (the temporary file goes beside the real target)"),
#else   /* aarch64 has only the newer form */
	ALLOW(readlinkat, "--get: realpath of LOCAL (the temporary file goes beside the real target)"),
#endif
	ALLOW(getcwd, "--get: realpath of a relative LOCAL"),
	ALLOW_EQ(fcntl, 1, F_GETFL, "non-blocking sockets and stdin: read the flags"),
	ALLOW_EQ(fcntl, 1, F_SETFL, "non-blocking sockets and stdin: set them"),
	ALLOW_EQ(ioctl, 1, TCGETS, "isatty: is stdin a terminal (--stdin -, --tty)"),
	ALLOW_EQ(ioctl, 1, TIOCGWINSZ, "--tty: our terminal's size for the guest's"),
	ALLOW(getrandom, "FRESHEN: 32 fresh random bytes for a restored guest"),
	/* --audit: records go to the log's writer process over a socket
	 * (sendto, recvfrom, poll above); this process holds no log, and no
	 * flock, ftruncate or fdatasync to cut one back with. */
	ALLOW(nanosleep, "short bounded waits (usleep)"),
	ALLOW(clock_nanosleep, "the same, as glibc issues usleep"),
};

/* snapshot create's client: as the agent, then vm_snapshot_save on this
 * thread: pause, KVM's GET ioctls, the memory, overlay and state files.
 * Also boot --vsock's control socket thread (mayfly pause, fork): the same
 * save, into files its client passes; and DISK_INSERT, an image its client
 * passes (fstat, fcntl and mmap: the agent's and every thread's; flock). */
static const struct seccomp_rule snapshot[] = {
	ALLOW(accept4, "boot --vsock: a client of the control socket PATH.ctl (mayfly pause, fork)"),
	ALLOW(flock, "DISK_INSERT: the image its client passes is locked as every disk is"),
#ifdef SYS_mkdir
	ALLOW(mkdir, "the hash cache of the memory file (an unjailed save)"),
#else   /* aarch64 has only the newer form */
	ALLOW(mkdirat, "the hash cache of the memory file (an unjailed save)"),
#endif
#ifdef SYS_rmdir
	ALLOW(rmdir, "unjailed, a failed save removes its directory"),
#else   /* aarch64 has only the newer form */
	ALLOW(unlinkat, "unjailed, a failed save removes its directory"),
#endif
	ALLOW(renameat2, "unjailed, a new snapshot swapped with an old one (RENAME_EXCHANGE)"),
	ALLOW(ftruncate, "the sparse memory and overlay files get their size"),
	ALLOW(pwrite64, "guest RAM and overlay blocks that hold data"),
	ALLOW(pwritev, "the copy-on-write overlay's written blocks, through the disk layer"),
	ALLOW(mincore, "guest RAM: which pages were ever touched (the memory file stays sparse)"),
	ALLOW(pread64, "/proc/self/pagemap: which pages the guest touched"),
	ALLOW(fdatasync, "the state file on disk before its rename"),
	IOCTL(KVM_CHECK_EXTENSION, "XSAVE2 size, TSC deadline timer"),
#if defined(__x86_64__)
	IOCTL(KVM_GET_MSR_INDEX_LIST, "which MSRs to save"),
	IOCTL(KVM_GET_PIT2, "VM state: the PIT"),
	IOCTL(KVM_GET_CLOCK, "VM state: kvmclock"),
	IOCTL(KVM_GET_IRQCHIP, "VM state: PICs and IOAPIC"),
	IOCTL(KVM_GET_MP_STATE, "vCPU state"),
	IOCTL(KVM_GET_REGS, "vCPU state"),
	IOCTL(KVM_GET_SREGS, "vCPU state"),
	IOCTL(KVM_GET_XSAVE, "vCPU state (FPU/SSE/AVX)"),
	IOCTL(KVM_GET_XSAVE2, "vCPU state, a larger XSAVE area"),
	IOCTL(KVM_GET_XCRS, "vCPU state"),
	IOCTL(KVM_GET_DEBUGREGS, "vCPU state"),
	IOCTL(KVM_GET_LAPIC, "vCPU state"),
	IOCTL(KVM_GET_VCPU_EVENTS, "vCPU state"),
	IOCTL(KVM_GET_MSRS, "vCPU state"),
	IOCTL(KVM_GET_TSC_KHZ, "vCPU state: the TSC frequency a restore must match"),
#elif defined(__aarch64__)
	IOCTL(KVM_GET_REG_LIST, "vCPU state: which registers KVM has"),
	IOCTL(KVM_GET_ONE_REG, "vCPU state: each register, the timer's too"),
	IOCTL(KVM_GET_MP_STATE, "vCPU state: powered off or runnable"),
	IOCTL(KVM_GET_VCPU_EVENTS, "vCPU state: a pending SError"),
	IOCTL(KVM_ARM_PREFERRED_TARGET, "VM state: the CPU target a restore must match"),
	IOCTL(KVM_GET_DEVICE_ATTR, "VM state: the GICv3's registers"),
#endif
	IOCTL(KVM_SET_USER_MEMORY_REGION, "the working set: KVM_MEM_LOG_DIRTY_PAGES on guest RAM"),
	IOCTL(KVM_GET_DIRTY_LOG, "the working set: the pages the guest wrote"),
};

/* The network broker (vmm/net/broker.c), a process of its own: requests
 * over its socket pair, the host's resolver with /etc/hosts and DNS alone
 * (no NSS module is loaded: no executable mapping is ever needed), a
 * connect, the socket passed back. Files only read-only. */
static const struct seccomp_rule broker[] = {
	ALLOW(recvfrom, "requests from the VMM; DNS answers"),
	ALLOW(sendmsg, "the answer, with the connected socket (SCM_RIGHTS)"),
	ALLOW(close, "the socket passed on; the resolver's files and sockets"),
	ALLOW_EQ(socket, 0, AF_INET, "the connection asked for; DNS over UDP/TCP"),
	ALLOW_EQ(socket, 0, AF_INET6, "the same, IPv6"),
	ALLOW_EQ(socket, 0, AF_UNIX, "the resolver asks nscd's socket first (absent: it goes on)"),
	ALLOW_EQ(socket, 0, AF_NETLINK, "getaddrinfo's address sorting asks which local addresses exist"),
	ALLOW(connect, "the connection (non-blocking); DNS servers; the sorting's probes"),
	ALLOW(bind, "getaddrinfo's netlink query"),
	ALLOW(getsockname, "the sorting: a probe's source address; netlink"),
	ALLOW(getsockopt, "SO_ERROR: did the non-blocking connect succeed"),
	ALLOW(setsockopt, "the resolver's socket options (IPv6 DNS)"),
	ALLOW(sendto, "DNS queries; the netlink request"),
	ALLOW(sendmmsg, "DNS: the A and AAAA queries in one call"),
	ALLOW(recvmsg, "the netlink answer"),
	ALLOW_EQ(ioctl, 1, FIONREAD, "DNS: the size of an answer waiting"),
	ALLOW_CLEAR(openat, 2, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND,
		    "/etc/hosts, /etc/resolv.conf, /etc/host.conf, /etc/gai.conf: read-only"),
#ifdef SYS_open
	ALLOW_CLEAR(open, 1, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND, "the same, older form"),
#else   /* aarch64 has only the newer form */
	ALLOW_CLEAR(openat, 2, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND, "the same, older form"),
#endif
	ALLOW(read, "those files"),
	ALLOW(fstat, "stdio reads a file's size"),
	ALLOW(newfstatat, "the same; the resolver checks whether resolv.conf changed"),
	ALLOW(lseek, "stdio on those files"),
	ALLOW(uname, "the resolver's default domain (gethostname)"),
	ALLOW(getrandom, "DNS query ids"),
};

/* The audit log's writer (vmm/policy/audit_writer.c), a process of its
 * own: records from the VM over its socket, each appended to the log it
 * alone holds, under the log's lock, synced. No file is opened. */
static const struct seccomp_rule audit_writer[] = {
	ALLOW(recvfrom, "a record from the VM process"),
	ALLOW(sendto, "the append's result back"),
	ALLOW(flock, "the log's lock (other mayfly processes append too)"),
	ALLOW(fstat, "the log's size: did another process append"),
	ALLOW(newfstatat, "the same, as glibc issues fstat"),
	ALLOW(pread64, "the chain's last line, when another process appended"),
	ALLOW(ftruncate, "a torn write is cut back, never left half a line"),
	ALLOW(fdatasync, "each record on disk before its result is sent"),
	ALLOW(nanosleep, "waiting (bounded) for another process's lock"),
	ALLOW(clock_nanosleep, "the same, as glibc issues usleep"),
};

/* The jail's supervisor (vmm/jail/jail.c), the process the VM was forked
 * from, for the VM's whole life: it passes signals on and waits; once
 * the VM is gone it removes what the jail made, stops its helpers and
 * finishes the command (a --get's rename, a new snapshot put in place,
 * the terminal given back). Files are only opened to be read (cgroup
 * counters); no mount, namespace, ptrace, exec or new process. */
static const struct seccomp_rule supervisor[] = {
	ALLOW(wait4, "the VM process; then the approve spawner, broker and audit writer"),
	ALLOW(kill, "signals passed on to the VM; the network broker ended"),
	ALLOW(getppid, "our caller died: the VM is killed"),
	ALLOW(signalfd4, "the signals to pass on, read as they come"),
	ALLOW(close, "the helpers' sockets, the --get files, the lease"),
#ifdef SYS_rmdir
	ALLOW(rmdir, "the jail directory, the VM's cgroup, a failed snapshot's directory"),
#else   /* aarch64 has only the newer form */
	ALLOW(unlinkat, "the jail directory, the VM's cgroup, a failed snapshot's directory"),
#endif
#ifdef SYS_unlink
	ALLOW(unlink, "the lease file, the VM's sockets, a failed --get's or snapshot's files"),
#else   /* aarch64 has only the newer form */
	ALLOW(unlinkat, "the lease file, the VM's sockets, a failed --get's or snapshot's files"),
#endif
	ALLOW(newfstatat, "lstat: is it still the VM's socket; is dir a snapshot already"),
	ALLOW(fstat, "stdio, at exit"),
	ALLOW_CLEAR(openat, 2, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND,
		    "the VM cgroup's memory.events (an OOM kill?); a new snapshot's directory: read-only"),
#ifdef SYS_open
	ALLOW_CLEAR(open, 1, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND, "the same, older form"),
#else   /* aarch64 has only the newer form */
	ALLOW_CLEAR(openat, 2, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND, "the same, older form"),
#endif
	ALLOW(fchownat, "snapshot create: the jailed VMM's state file becomes the caller's"),
	ALLOW(fchown, "the same: its directory, through the descriptor it was checked by"),
	ALLOW(geteuid, "the same: whose it becomes"),
	ALLOW(getegid, "the same"),
#ifdef SYS_rename
	ALLOW(rename, "--get: the temporary file replaces LOCAL; a new snapshot's name"),
#else   /* aarch64 has only the newer form */
	ALLOW(renameat, "--get: the temporary file replaces LOCAL; a new snapshot's name"),
#endif
	ALLOW(renameat2, "a new snapshot swapped with an older one (RENAME_EXCHANGE)"),
	ALLOW(lseek, "stdio, at exit"),
	ALLOW_EQ(ioctl, 1, TCGETS, "run --tty: the terminal's mode given back"),
	ALLOW_EQ(ioctl, 1, TCSETS, "the same"),
	ALLOW(rt_sigaction, "the terminal's signal handlers put back"),
	ALLOW_EQ(fcntl, 1, F_GETFL, "stdin's flags put back"),
	ALLOW_EQ(fcntl, 1, F_SETFL, "the same"),
	ALLOW(nanosleep, "short bounded waits (usleep)"),
	ALLOW(clock_nanosleep, "the same, as glibc issues usleep"),
};

/* What the ASan/UBSan/LSan runtime itself calls: reports, the shadow
 * memory, and LeakSanitizer's check at exit (it stops the world with a
 * ptrace'ing helper thread it clones). Only sanitizer builds get this:
 * the shipped static binary never does. */
static const struct seccomp_rule sanitizer[] = {
	ALLOW(openat, "reports and LSan read /proc/self/maps, /proc/self/task"),
#ifdef SYS_open
	ALLOW(open, "the same"),
#else   /* aarch64 has only the newer form */
	ALLOW(openat, "the same"),
#endif
	ALLOW(close, "the same"),
	ALLOW(read, "the same"),
	ALLOW(pread64, "the same"),
	ALLOW(getdents64, "LSan lists /proc/self/task"),
#ifdef SYS_getdents
	ALLOW(getdents, "the same, as gcc's libsanitizer calls it"),
#else   /* aarch64 has only the newer form */
	ALLOW(getdents64, "the same, as gcc's libsanitizer calls it"),
#endif
#ifdef SYS_readlink
	ALLOW(readlink, "reports find the binary's path"),
#else   /* aarch64 has only the newer form */
	ALLOW(readlinkat, "reports find the binary's path"),
#endif
	ALLOW(readlinkat, "the same"),
	ALLOW(newfstatat, "the same"),
	ALLOW(fstat, "the same"),
	ALLOW(lseek, "the same"),
	ALLOW(prctl, "LSan's helper: PR_SET_PDEATHSIG, PR_GET_DUMPABLE"),
	ALLOW(ptrace, "LSan's helper attaches to every thread to scan its registers"),
	ALLOW(wait4, "LSan waits for its helper and the stopped threads"),
	ALLOW(clone, "LSan's helper thread"),
	ALLOW(clone3, "the same"),
	ALLOW(tgkill, "abort() after a report"),
	ALLOW(kill, "the same"),
	ALLOW(rt_sigaction, "LSan's helper and reports install handlers"),
	ALLOW(sigaltstack, "the sanitizers' alternate signal stack"),
	ALLOW(sched_getaffinity, "the runtime's CPU count"),
	ALLOW(getrlimit, "the runtime checks the stack limit"),
	ALLOW(prlimit64, "the same"),
	ALLOW(uname, "the runtime checks the kernel version"),
	ALLOW(getppid, "LSan's helper checks its parent"),
	ALLOW(nanosleep, "LSan's helper waits"),
	ALLOW(clock_nanosleep, "the same"),
#ifdef SYS_poll
	ALLOW(poll, "the same"),
#else   /* aarch64 has only the newer form */
	ALLOW(ppoll, "the same"),
#endif
	ALLOW(ppoll, "the same"),
	ALLOW(process_vm_readv, "the runtime reads its own memory safely"),
	ALLOW(pipe2, "the runtime's internal pipes"),
#ifdef SYS_dup2
	ALLOW(dup2, "reports to a log path"),
#else   /* aarch64 has only the newer form */
	ALLOW(dup3, "reports to a log path"),
#endif
	ALLOW(dup3, "the same"),
	ALLOW(getuid, "the runtime's options"),
	ALLOW(geteuid, "the same"),
	ALLOW(sched_yield, "spin locks"),
	ALLOW(statfs, "the same"),
	ALLOW(msync, "the runtime checks whether an address is mapped"),
	ALLOW(mincore, "the same"),
	ALLOW(rt_sigtimedwait, "LSan's helper"),
	ALLOW(getrandom, "the allocator's randomisation"),
	ALLOW(fcntl, "reports: is the output fd open"),
	ALLOW_EQ(ioctl, 1, TCGETS, "reports: colours only on a terminal (isatty)"),
};

static const struct seccomp_group g_every = GROUP(every_thread, "every thread");
static const struct seccomp_group g_kicker = GROUP(kicker, "threads that kick");
static const struct seccomp_group g_waiter = GROUP(waiter, "threads that wait on fds");
static const struct seccomp_group g_main = GROUP(main_thread, "main");
static const struct seccomp_group g_vcpu = GROUP(vcpu, "vcpu");
static const struct seccomp_group g_io = GROUP(io, "io");
static const struct seccomp_group g_console = GROUP(console, "console");
static const struct seccomp_group g_log = GROUP(log_writer, "log");
static const struct seccomp_group g_agent = GROUP(agent, "agent");
static const struct seccomp_group g_snapshot = GROUP(snapshot, "snapshot");
static const struct seccomp_group g_broker = GROUP(broker, "broker");
static const struct seccomp_group g_audit = GROUP(audit_writer, "audit");
static const struct seccomp_group g_supervisor = GROUP(supervisor, "supervisor");

const struct seccomp_group seccomp_sanitizer_group = GROUP(sanitizer, "sanitizer builds");

const struct seccomp_role_rules seccomp_rules[SECCOMP_ROLE_COUNT] = {
	[SECCOMP_ROLE_MAIN] = { "main", { &g_every, &g_kicker, &g_waiter, &g_main } },
	[SECCOMP_ROLE_VCPU] = { "vcpu", { &g_every, &g_vcpu } },
	[SECCOMP_ROLE_IO] = { "io", { &g_every, &g_io } },
	[SECCOMP_ROLE_CONSOLE] = { "console", { &g_every, &g_console } },
	[SECCOMP_ROLE_LOG] = { "log", { &g_every, &g_log } },
	[SECCOMP_ROLE_AGENT] = { "agent", { &g_every, &g_kicker, &g_waiter, &g_agent } },
	[SECCOMP_ROLE_SNAPSHOT] = { "snapshot",
		{ &g_every, &g_kicker, &g_waiter, &g_agent, &g_snapshot } },
	[SECCOMP_ROLE_BROKER] = { "broker", { &g_every, &g_waiter, &g_broker } },
	[SECCOMP_ROLE_AUDIT] = { "audit", { &g_every, &g_waiter, &g_audit } },
	[SECCOMP_ROLE_SUPERVISOR] = { "supervisor", { &g_every, &g_waiter, &g_supervisor } },
};
