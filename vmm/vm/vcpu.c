/* vcpu.c - one thread per vCPU: set up its registers, then KVM_RUN and dispatch each exit. */
#include "vm/vcpu.h"
#include "lib/clock.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "seccomp/seccomp.h"
#include "lib/thread.h"
#include "vm/arch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

void vcpu_shared_init(struct vcpu_shared *sh)
{
	pthread_mutex_init(&sh->lock, NULL);
	pthread_cond_init(&sh->cond, NULL);
}

int vcpu_init(struct vcpu *vcpu, struct vcpu_shared *sh, unsigned index)
{
	int rc;

	memset(vcpu, 0, sizeof(*vcpu));
	vcpu->sh = sh;
	vcpu->index = index;
	vcpu->fd = ioctl(sh->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
	if (vcpu->fd < 0)
		return -errno;
	vcpu->run = mmap(NULL, sh->run_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 vcpu->fd, 0);
	if (vcpu->run == MAP_FAILED) {
		rc = -errno;
		vcpu->run = NULL;
		close(vcpu->fd);
		vcpu->fd = -1;
		return rc;
	}
	return 0;
}

/* End the VM with code and a reason (sh->stop: the first caller wins). */
static void vcpu_stop(struct vcpu *vcpu, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void vcpu_stop(struct vcpu *vcpu, int code, const char *fmt, ...)
{
	char reason[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	vcpu->sh->stop(vcpu->sh->stop_opaque, code, reason);
}

static void vcpu_log_fatal(struct vcpu *vcpu, int code, const char *what)
{
	vcpu_stop(vcpu, code, "vcpu%u: %s at pc=0x%llx", vcpu->index, what,
		  (unsigned long long)arch_vcpu_pc(vcpu->fd));
}

static void vcpu_handle_io(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool is_write = run->io.direction == KVM_EXIT_IO_OUT;

	/* String I/O (rep outsb) arrives as count consecutive accesses. The
	 * data_offset/size/count come from KVM, not the guest, and lie within
	 * the run page KVM mapped for us. */
	for (uint32_t i = 0; i < run->io.count; i++) {
		bus_dispatch(vcpu->sh->pio, run->io.port, data, run->io.size, is_write);
		data += run->io.size;
	}
}

static void vcpu_handle_mmio(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;
	uint32_t len = run->mmio.len;

	if (len == 0 || len > sizeof(run->mmio.data))
		return;
	bus_dispatch(vcpu->sh->mmio, run->mmio.phys_addr, run->mmio.data, len,
		     run->mmio.is_write);
}

/* The reason goes into the one line vm_stop's reason becomes, not a line
 * of its own: every vCPU may get here, and only the first is logged. */
static void vcpu_unexpected_exit(struct vcpu *vcpu)
{
	char what[48];

	snprintf(what, sizeof(what), "unexpected KVM exit reason %u", vcpu->run->exit_reason);
	vcpu_log_fatal(vcpu, EXIT_KVM_ERROR, what);
}

/* Handle one exit; false when the VM must end. */
static bool vcpu_handle_exit(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;

	vcpu->exits[run->exit_reason < VCPU_EXIT_REASONS ? run->exit_reason : 0]++;
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		vcpu_handle_io(vcpu);
		return true;
	case KVM_EXIT_MMIO:
		vcpu_handle_mmio(vcpu);
		return true;
	case KVM_EXIT_INTR:
		return true;
	case KVM_EXIT_SHUTDOWN:
		vcpu_log_fatal(vcpu, EXIT_TRIPLE_FAULT, "guest triple fault (KVM_EXIT_SHUTDOWN)");
		return false;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_RESET ||
		    run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN) {
			vcpu_stop(vcpu, EXIT_GUEST_RESET, "guest system event %u",
				  run->system_event.type);
			return false;
		}
		vcpu_log_fatal(vcpu, EXIT_KVM_ERROR, "unexpected KVM system event");
		return false;
	case KVM_EXIT_FAIL_ENTRY:
		vcpu_stop(vcpu, EXIT_KVM_ERROR,
			  "vcpu%u: KVM entry failed, hardware reason 0x%llx", vcpu->index,
			  (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		return false;
	case KVM_EXIT_INTERNAL_ERROR:
		vcpu_log_fatal(vcpu, EXIT_KVM_ERROR,
			       run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION ?
			       "KVM internal error: instruction emulation failed" :
			       "KVM internal error");
		return false;
	default:
		vcpu_unexpected_exit(vcpu);
		return false;
	}
}

int vcpu_settle(int vcpu_fd, struct kvm_run *run)
{
	int rc = 0;

	run->immediate_exit = 1;
	if (ioctl(vcpu_fd, KVM_RUN, 0) == 0 || errno != EINTR)
		rc = -EIO;   /* it should have returned at once with EINTR */
	run->immediate_exit = 0;
	return rc;
}

/* vcpu_pause_all asked: finish the instruction of the last PIO/MMIO exit
 * (its IN data goes to the register only on the next KVM_RUN) without
 * running the guest further, then wait. */
static void vcpu_park(struct vcpu *vcpu)
{
	struct vcpu_shared *sh = vcpu->sh;
	int rc = vcpu_settle(vcpu->fd, vcpu->run);

	if (rc)
		vcpu_stop(vcpu, EXIT_KVM_ERROR, "vcpu%u: cannot settle for a pause: %s",
			  vcpu->index, strerror(-rc));
	pthread_mutex_lock(&sh->lock);
	sh->parked++;
	pthread_cond_broadcast(&sh->cond);
	while (atomic_load(&sh->pausing) && !atomic_load(&sh->ending))
		pthread_cond_wait(&sh->cond, &sh->lock);
	sh->parked--;
	pthread_mutex_unlock(&sh->lock);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *vcpu = arg;
	struct vcpu_shared *sh = vcpu->sh;
	char name[16];

	snprintf(name, sizeof(name), "vcpu%u", vcpu->index);
	thread_set_name(name);
	seccomp_enter(SECCOMP_ROLE_VCPU);
	/* No guest instruction before every thread, the main one included,
	 * is confined: vm_run releases the vCPUs once it is. */
	pthread_mutex_lock(&sh->lock);
	while (!sh->released && !atomic_load(&sh->ending))
		pthread_cond_wait(&sh->cond, &sh->lock);
	pthread_mutex_unlock(&sh->lock);
	log_debug("vcpu%u: first KVM_RUN", vcpu->index);
	if (vcpu->index == 0)
		atomic_store(&sh->first_run_ns, clock_now_ns());

	while (!atomic_load(&sh->ending)) {
		if (atomic_load(&sh->pausing)) {
			vcpu_park(vcpu);
			continue;
		}
		if (ioctl(vcpu->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				vcpu->run->immediate_exit = 0;
				continue;
			}
			if (errno == EFAULT && vcpu->sh->ram_file_backed)
				/* The file lost pages under the mapping: truncated. */
				vcpu_stop(vcpu, EXIT_KVM_ERROR, "vcpu%u: guest RAM is gone: the "
					  "snapshot's memory file was cut short while the VM ran "
					  "(KVM_RUN: %s)", vcpu->index, strerror(errno));
			else
				vcpu_stop(vcpu, EXIT_KVM_ERROR, "vcpu%u: KVM_RUN failed: %s",
					  vcpu->index, strerror(errno));
			break;
		}
		if (!vcpu_handle_exit(vcpu))
			break;
	}
	return NULL;
}

int vcpu_start(struct vcpu *vcpu)
{
	/* Only the kick signal reaches a vCPU thread: it makes KVM_RUN return. */
	int rc = thread_start(&vcpu->thread, vcpu_thread, vcpu);

	if (rc)
		return rc;
	vcpu->started = true;
	return 0;
}

void vcpu_kick(struct vcpu *vcpu)
{
	if (!vcpu->started)
		return;
	/* immediate_exit covers the window where the thread is about to enter
	 * KVM_RUN and so would miss the signal. */
	vcpu->run->immediate_exit = 1;
	thread_kick(vcpu->thread);
}

void vcpu_join(struct vcpu *vcpu)
{
	if (vcpu->started)
		pthread_join(vcpu->thread, NULL);
	vcpu->started = false;
}

void vcpu_destroy(struct vcpu *vcpu)
{
	if (vcpu->run && vcpu->run != MAP_FAILED)
		munmap(vcpu->run, vcpu->sh->run_size);
	if (vcpu->fd >= 0)
		close(vcpu->fd);
	vcpu->run = NULL;
	vcpu->fd = -1;
}

void vcpu_release(struct vcpu_shared *sh)
{
	pthread_mutex_lock(&sh->lock);
	sh->released = true;
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
}

void vcpu_end(struct vcpu_shared *sh)
{
	/* A brief lock, never held while waiting: parked vCPUs wake to leave. */
	pthread_mutex_lock(&sh->lock);
	atomic_store(&sh->ending, true);
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
}

int vcpu_pause_all(struct vcpu_shared *sh, struct vcpu *vcpus, unsigned n)
{
	int rc = 0;

	atomic_store(&sh->pausing, true);
	for (unsigned i = 0; i < n; i++)
		vcpu_kick(&vcpus[i]);
	pthread_mutex_lock(&sh->lock);
	while (sh->parked < n && !atomic_load(&sh->ending))
		pthread_cond_wait(&sh->cond, &sh->lock);
	if (atomic_load(&sh->ending) || sh->parked < n)
		rc = -ECANCELED;
	pthread_mutex_unlock(&sh->lock);
	return rc;
}

void vcpu_resume_all(struct vcpu_shared *sh)
{
	pthread_mutex_lock(&sh->lock);
	atomic_store(&sh->pausing, false);
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
}

const char *vcpu_exit_name(int reason)
{
	static const char *const names[VCPU_EXIT_REASONS] = {
		[KVM_EXIT_UNKNOWN] = "other", [KVM_EXIT_IO] = "io", [KVM_EXIT_MMIO] = "mmio",
		[KVM_EXIT_INTR] = "intr", [KVM_EXIT_SHUTDOWN] = "shutdown",
		[KVM_EXIT_SYSTEM_EVENT] = "system-event",
		[KVM_EXIT_INTERNAL_ERROR] = "internal-error", [KVM_EXIT_FAIL_ENTRY] = "fail-entry",
	};

	return reason >= 0 && reason < VCPU_EXIT_REASONS && names[reason] ? names[reason] : "other";
}

void vcpu_exit_totals(const struct vcpu *vcpus, unsigned n, uint64_t totals[VCPU_EXIT_REASONS])
{
	for (int r = 0; r < VCPU_EXIT_REASONS; r++)
		totals[r] = 0;
	for (unsigned i = 0; vcpus && i < n; i++)
		for (int r = 0; r < VCPU_EXIT_REASONS; r++)
			totals[r] += vcpus[i].exits[r];
}

void vcpu_log_exit_stats(const struct vcpu *vcpus, unsigned n)
{
	uint64_t by_reason[VCPU_EXIT_REASONS], total = 0;
	char line[512] = "";
	size_t used = 0;

	if (!log_enabled(LOG_INFO) || !n)
		return;
	vcpu_exit_totals(vcpus, n, by_reason);
	for (int r = 0; r < VCPU_EXIT_REASONS; r++)
		total += by_reason[r];
	for (int r = 0; r < VCPU_EXIT_REASONS && used < sizeof(line); r++)
		if (by_reason[r])
			used += (size_t)snprintf(line + used, sizeof(line) - used, " %s=%llu",
						 vcpu_exit_name(r), (unsigned long long)by_reason[r]);
	if (used < sizeof(line))
		used += (size_t)snprintf(line + used, sizeof(line) - used, ";");
	bus_format_hits(vcpus[0].sh->pio, line, sizeof(line));
	bus_format_hits(vcpus[0].sh->mmio, line, sizeof(line));
	log_info("vm exits to mayfly: %llu:%s", (unsigned long long)total, line);
}
