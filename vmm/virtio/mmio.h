/* mmio.h - the virtio-mmio transport (virtio 1.2, version 2 only): registers, status, queues, interrupts. */
#ifndef MAYFLY_VIRTIO_MMIO_H
#define MAYFLY_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/log.h"
#include "mem/mem.h"
#include "snapshot/codec.h"
#include "virtio/queue.h"

#define VIRTIO_MMIO_MAX_QUEUES 4
/* Not VIRTIO_MMIO_VENDOR_ID: <linux/virtio_mmio.h> uses that name for the
 * register's offset (0x00c), and its definition would silently win. */
#define MAYFLY_VIRTIO_VENDOR_ID 0x464d594d   /* "MYMF" little-endian: mayfly */

struct virtio_mmio;

/* What a device (blk, vsock) gives the transport. All callbacks run with
 * the transport lock held. */
struct virtio_device_ops {
	const char *name;          /* "blk", for log lines */
	uint32_t device_id;        /* VIRTIO_ID_BLOCK, ... */
	unsigned nr_queues;
	uint16_t queue_max;        /* QueueNumMax, a power of two <= VQ_MAX_SIZE */
	/* Read `len` bytes of device config space at `offset` (already checked
	 * to lie inside config_size). */
	void (*config_read)(void *dev, uint32_t offset, uint8_t *data, uint32_t len);
	uint32_t config_size;
	/* The driver kicked queue `index` (I/O thread; device is DRIVER_OK and
	 * healthy, the queue ready). Pop, work, push, then virtio_mmio_notify. */
	void (*queue_notify)(void *dev, struct virtio_mmio *m, unsigned index);
	/* The driver reset the device: drop in-flight state. */
	void (*reset)(void *dev);
	/* Snapshot hooks, both optional: a device without them has nothing
	 * to save beyond the transport. The vCPUs are paused and the I/O
	 * thread is stopped.
	 * save: append the device's own part of the payload (it follows the
	 * transport's). Runs before the transport is encoded, so it may first
	 * settle in-flight state into the queues (vsock gives back an rx chain
	 * it holds); or it refuses with -EBUSY and *why naming the device.
	 * restore: read the device's part, the rest of the payload, from `in`
	 * (untrusted) and check all of it, snap_in_end included, before
	 * changing anything; the transport's state is applied after it and
	 * cannot fail. 0, or -EBADMSG / -EINVAL with *why naming the device. */
	int (*save)(void *dev, struct snap_out *o, const char **why);
	int (*restore)(void *dev, struct snap_in *in, const char **why);
};

/* What the I/O thread gets back when a kick eventfd fires. */
struct virtio_mmio_kicker {
	struct virtio_mmio *m;
	unsigned index;
};

struct virtio_mmio {
	pthread_mutex_t lock;          /* serialises registers against device work */
	const struct virtio_device_ops *ops;
	void *dev;
	const struct guest_mem *mem;
	char name[16];                 /* "vda", for log lines */

	uint64_t device_features;      /* offered */
	uint64_t driver_features;      /* accepted by the driver */
	uint32_t device_features_sel, driver_features_sel, queue_sel;
	uint8_t status;
	_Atomic uint32_t interrupt_status;   /* read and acked without the lock */
	uint32_t config_generation;
	struct vq queues[VIRTIO_MMIO_MAX_QUEUES];

	int irq_fd;                    /* eventfd; KVM's irqfd turns a write into an edge */
	int kick_fds[VIRTIO_MMIO_MAX_QUEUES];   /* eventfds; KVM's ioeventfd writes them */
	struct virtio_mmio_kicker kickers[VIRTIO_MMIO_MAX_QUEUES];

	/* One limit per cause of log lines the guest can trigger; never reset
	 * with the device, so a reset-and-break loop stays limited. */
	struct log_limit lim_access;       /* a register access not 32-bit aligned */
	struct log_limit lim_register;     /* a write to an unknown or read-only register */
	struct log_limit lim_features;     /* features written out of order, or not offered */
	struct log_limit lim_queue_regs;   /* queue registers outside FEATURES_OK..DRIVER_OK */
	struct log_limit lim_status;       /* a status step outside the sequence */
	struct log_limit lim_kick;         /* a kick for no queue, or while not live */
	struct log_limit lim_gave_up;      /* the driver set FAILED */
	struct log_limit lim_broken;       /* virtio_mmio_fail: the device needs a reset */
	struct log_limit lim_eventfd;      /* an interrupt or kick eventfd write failed */

	uint64_t kicks, interrupts;    /* statistics */
};

/* Set up the transport for one device: create the irq and kick eventfds.
 * The struct must not move afterwards (kickers point into it). 0 or -errno. */
int virtio_mmio_init(struct virtio_mmio *m, const struct virtio_device_ops *ops, void *dev,
		     uint64_t features, const struct guest_mem *mem, const char *name)
	__attribute__((warn_unused_result));
void virtio_mmio_destroy(struct virtio_mmio *m);

/* The bus handler for the device's 4 KiB register window (vCPU threads). */
void virtio_mmio_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write);

/* The I/O thread saw kick_fds[index] readable: drain it and, if the device
 * is live, run ops->queue_notify. */
void virtio_mmio_kick(struct virtio_mmio *m, unsigned index);

/* event_fn for kick_fds[i], with opaque &m->kickers[i]. */
void virtio_mmio_kick_event(void *kicker, uint32_t events);

/* Device side, lock held: used buffers were pushed on a queue; raise the
 * interrupt. */
void virtio_mmio_notify(struct virtio_mmio *m);

/* Device side, lock held: the device's config space changed (a disk put
 * into an empty slot): bump the config generation and raise the
 * config-change interrupt. */
void virtio_mmio_config_changed(struct virtio_mmio *m);

/* Device side, lock held: the guest broke the protocol. Set NEEDS_RESET,
 * tell the driver (config-change interrupt), log `why` (once per failure,
 * and through lim_broken: a guest failing the device again after each
 * reset stays limited), and stop serving queues until the driver resets
 * the device. */
void virtio_mmio_fail(struct virtio_mmio *m, const char *why);

/* Whether the device serves its queues: DRIVER_OK, not failed. */
bool virtio_mmio_live(const struct virtio_mmio *m);

/* Snapshot: append the transport's state, then the device's own
 * (ops->save), as one section payload (docs/snapshot.md, "Devices"): the
 * device id and queue count, features, selectors, status, interrupt
 * status, config generation, and each queue's configuration and progress.
 * The vCPUs must be paused (no register access in flight) and the I/O
 * thread stopped (no device work in flight). 0; -EBUSY with *why when the
 * device refuses (vsock with connections open); -ENOMEM. */
int virtio_mmio_save(struct virtio_mmio *m, struct snap_out *o, const char **why)
	__attribute__((warn_unused_result));

/* Apply a saved payload (untrusted bytes) to a device fresh from its init
 * (same config, same slot as the snapshotted one), guest RAM already
 * restored. Checks, before changing anything: the same device id and
 * queue count and exactly the features this device offers (else
 * -EINVAL); a status from the virtio status table (3.1.1: each step of
 * the init sequence, each with FAILED and NEEDS_RESET or not); from
 * FEATURES_OK on, driver features the device offered, VERSION_1 among
 * them; interrupt status bits VRING and CONFIG only; queues ready only from
 * FEATURES_OK on, with EVENT_IDX as negotiated, each checked as
 * vq_restore says; then the device's part (ops->restore). Anything else
 * is -EBADMSG; a device that is not fresh is -EBUSY; *why names the
 * device. Every selector value is accepted: the guest can write any, and
 * each use checks it. Before any vCPU or the I/O thread runs. */
int virtio_mmio_restore(struct virtio_mmio *m, const void *data, size_t len, const char **why)
	__attribute__((warn_unused_result));

/* After virtio_mmio_restore and vm_state_restore (the interrupt
 * controllers): if the device is live, kick each ready queue once (a kick
 * the guest wrote just before the pause may have been left unread in the
 * old process's eventfd, so work it asked for was never done), and raise
 * the interrupt again if one is pending (an irqfd write just before the
 * pause may not have reached the saved interrupt controllers; a spurious
 * one costs the driver a register read). Writes the eventfds only: the
 * device does the work once the I/O thread runs. */
void virtio_mmio_resume(struct virtio_mmio *m);

#endif
