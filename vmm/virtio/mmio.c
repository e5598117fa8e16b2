/* mmio.c - the virtio-mmio register file, the device status state machine and queue setup. */
#include "virtio/mmio.h"
#include "lib/errmsg.h"
#include "lib/log.h"

#include <errno.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MMIO_MAGIC   0x74726976   /* "virt" */
#define MMIO_VERSION 2            /* modern only: no legacy register layout */
#define MMIO_CONFIG  0x100        /* device config space starts here */

#define S_ACK  VIRTIO_CONFIG_S_ACKNOWLEDGE
#define S_DRV  VIRTIO_CONFIG_S_DRIVER
#define S_FOK  VIRTIO_CONFIG_S_FEATURES_OK
#define S_DOK  VIRTIO_CONFIG_S_DRIVER_OK

/* The driver's only way forward (virtio 1.2, 3.1.1): each step adds one bit.
 * FAILED may be added at any step and reset (0) is always allowed; both are
 * handled before the table. NEEDS_RESET is the device's bit, ignored here. */
static const struct status_step {
	uint8_t from, to;
} status_steps[] = {
	{ 0, S_ACK },
	{ S_ACK, S_ACK | S_DRV },
	{ S_ACK | S_DRV, S_ACK | S_DRV | S_FOK },
	{ S_ACK | S_DRV | S_FOK, S_ACK | S_DRV | S_FOK | S_DOK },
};

/* A driver mistake that is ignored: one line per cause, rate-limited. */
static void driver_mistake(struct virtio_mmio *m, struct log_limit *lim, const char *what)
{
	log_limited(lim, LOG_WARN, "virtio-%s %s: %s", m->ops->name, m->name, what);
}

int virtio_mmio_init(struct virtio_mmio *m, const struct virtio_device_ops *ops, void *dev,
		     uint64_t features, const struct guest_mem *mem, const char *name)
{
	memset(m, 0, sizeof(*m));
	m->irq_fd = -1;
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		m->kick_fds[i] = -1;
	if (ops->nr_queues > VIRTIO_MMIO_MAX_QUEUES || ops->queue_max > VQ_MAX_SIZE)
		return -EINVAL;
	m->ops = ops;
	m->dev = dev;
	m->mem = mem;
	m->device_features = features | (1ULL << VIRTIO_F_VERSION_1);
	snprintf(m->name, sizeof(m->name), "%s", name);
	pthread_mutex_init(&m->lock, NULL);
	m->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->irq_fd < 0)
		return -errno;
	for (unsigned i = 0; i < ops->nr_queues; i++) {
		m->kickers[i] = (struct virtio_mmio_kicker){ .m = m, .index = i };
		m->kick_fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (m->kick_fds[i] < 0)
			return -errno;
	}
	return 0;
}

void virtio_mmio_destroy(struct virtio_mmio *m)
{
	if (!m->ops)
		return;
	if (m->irq_fd >= 0)
		close(m->irq_fd);
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		if (m->kick_fds[i] >= 0)
			close(m->kick_fds[i]);
	pthread_mutex_destroy(&m->lock);
	m->ops = NULL;
}

bool virtio_mmio_live(const struct virtio_mmio *m)
{
	return (m->status & (S_DOK | VIRTIO_CONFIG_S_NEEDS_RESET | VIRTIO_CONFIG_S_FAILED)) == S_DOK;
}

/* An edge on the interrupt line (KVM's irqfd). */
static void signal_irq(struct virtio_mmio *m)
{
	uint64_t one = 1;

	m->interrupts++;
	/* EAGAIN means the counter is saturated: an edge is pending anyway. */
	if (write(m->irq_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_limited(&m->lim_eventfd, LOG_WARN, "virtio-%s %s: cannot raise the interrupt: %s",
			    m->ops->name, m->name, strerror(errno));
}

static void raise_irq(struct virtio_mmio *m, uint32_t why)
{
	atomic_fetch_or(&m->interrupt_status, why);
	signal_irq(m);
}

/* Wake the I/O thread for queue `index`, as KVM's ioeventfd does. */
static void kick_queue(struct virtio_mmio *m, unsigned index)
{
	uint64_t one = 1;

	if (write(m->kick_fds[index], &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_limited(&m->lim_eventfd, LOG_WARN, "virtio-%s %s: kick lost: %s", m->ops->name,
			    m->name, strerror(errno));
}

void virtio_mmio_notify(struct virtio_mmio *m)
{
	raise_irq(m, VIRTIO_MMIO_INT_VRING);
}

void virtio_mmio_config_changed(struct virtio_mmio *m)
{
	/* A driver reading config space across this sees the generation
	 * move and reads again (virtio 1.2, 4.2.2.2). */
	m->config_generation++;
	raise_irq(m, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_mmio_fail(struct virtio_mmio *m, const char *why)
{
	if (m->status & VIRTIO_CONFIG_S_NEEDS_RESET)
		return;
	m->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
	log_limited(&m->lim_broken, LOG_ERROR, "virtio-%s %s: device failed, needs reset: %s",
		    m->ops->name, m->name, why);
	raise_irq(m, VIRTIO_MMIO_INT_CONFIG);
}

static void device_reset(struct virtio_mmio *m)
{
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		vq_reset(&m->queues[i]);
	m->status = 0;
	m->driver_features = 0;
	m->device_features_sel = m->driver_features_sel = m->queue_sel = 0;
	atomic_store(&m->interrupt_status, 0);
	if (m->ops->reset)
		m->ops->reset(m->dev);
	log_debug("virtio-%s %s: reset", m->ops->name, m->name);
}

/* FEATURES_OK holds only for a subset of what was offered, with VERSION_1:
 * otherwise the bit stays clear and the driver, reading it back, gives up. */
static bool features_acceptable(uint64_t driver, uint64_t device)
{
	return !(driver & ~device) && (driver & (1ULL << VIRTIO_F_VERSION_1));
}

static void write_status(struct virtio_mmio *m, uint8_t val)
{
	uint8_t cur = m->status & (uint8_t)~VIRTIO_CONFIG_S_NEEDS_RESET;
	uint8_t want = val & (uint8_t)~VIRTIO_CONFIG_S_NEEDS_RESET;

	if (val == 0) {
		device_reset(m);
		return;
	}
	if (want == cur)
		return;
	if (want == (cur | VIRTIO_CONFIG_S_FAILED)) {
		m->status |= VIRTIO_CONFIG_S_FAILED;
		driver_mistake(m, &m->lim_gave_up, "driver gave up on the device (FAILED)");
		return;
	}
	for (size_t i = 0; i < sizeof(status_steps) / sizeof(status_steps[0]); i++) {
		if (status_steps[i].from != cur || status_steps[i].to != want)
			continue;
		if ((want & S_FOK) && !(cur & S_FOK) && !features_acceptable(m->driver_features, m->device_features)) {
			log_limited(&m->lim_features, LOG_WARN,
				    "virtio-%s %s: driver features 0x%llx not offered (0x%llx)",
				    m->ops->name, m->name, (unsigned long long)m->driver_features,
				    (unsigned long long)m->device_features);
			return;
		}
		m->status = (m->status & VIRTIO_CONFIG_S_NEEDS_RESET) | want;
		if (want & S_DOK)
			log_debug("virtio-%s %s: driver ready, features 0x%llx", m->ops->name,
				  m->name, (unsigned long long)m->driver_features);
		return;
	}
	driver_mistake(m, &m->lim_status, "status change outside the virtio sequence ignored");
}

/* Queue registers are the driver's between FEATURES_OK and DRIVER_OK only,
 * and only while the selected queue is not yet live. */
static struct vq *writable_queue(struct virtio_mmio *m)
{
	uint8_t phase = m->status & (S_FOK | S_DOK);

	if (phase != S_FOK || m->queue_sel >= m->ops->nr_queues ||
	    m->queues[m->queue_sel].ready) {
		driver_mistake(m, &m->lim_queue_regs,
			       "queue register written outside FEATURES_OK..DRIVER_OK, or for a live "
			       "or missing queue: ignored");
		return NULL;
	}
	return &m->queues[m->queue_sel];
}

static void set_low(uint64_t *v, uint32_t low)
{
	*v = (*v & ~0xffffffffULL) | low;
}

static void set_high(uint64_t *v, uint32_t high)
{
	*v = (*v & 0xffffffffULL) | ((uint64_t)high << 32);
}

static void queue_ready(struct virtio_mmio *m, struct vq *q, uint32_t val)
{
	const char *why = "";

	if (!val)
		return;   /* not yet live: nothing to undo */
	if (q->size > m->ops->queue_max) {
		virtio_mmio_fail(m, "queue size above QueueNumMax");
		return;
	}
	q->event_idx = m->driver_features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
	if (vq_activate(q, m->mem, &why))
		virtio_mmio_fail(m, why);
}

static void write_queue_reg(struct virtio_mmio *m, uint64_t offset, uint32_t val)
{
	struct vq *q = writable_queue(m);

	if (!q)
		return;
	switch (offset) {
	case VIRTIO_MMIO_QUEUE_NUM: q->size = (uint16_t)(val > 0xffff ? 0 : val); break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW: set_low(&q->desc_gpa, val); break;
	case VIRTIO_MMIO_QUEUE_DESC_HIGH: set_high(&q->desc_gpa, val); break;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW: set_low(&q->avail_gpa, val); break;
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH: set_high(&q->avail_gpa, val); break;
	case VIRTIO_MMIO_QUEUE_USED_LOW: set_low(&q->used_gpa, val); break;
	case VIRTIO_MMIO_QUEUE_USED_HIGH: set_high(&q->used_gpa, val); break;
	case VIRTIO_MMIO_QUEUE_READY: queue_ready(m, q, val); break;
	}
}

static void reg_write(struct virtio_mmio *m, uint64_t offset, uint32_t val)
{
	switch (offset) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL: m->device_features_sel = val; break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL: m->driver_features_sel = val; break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		/* Features are the driver's to set between DRIVER and FEATURES_OK. */
		if ((m->status & (S_DRV | S_FOK)) != S_DRV || m->driver_features_sel > 1) {
			driver_mistake(m, &m->lim_features, "driver features written out of order: ignored");
			break;
		}
		if (m->driver_features_sel)
			set_high(&m->driver_features, val);
		else
			set_low(&m->driver_features, val);
		break;
	case VIRTIO_MMIO_QUEUE_SEL: m->queue_sel = val; break;
	case VIRTIO_MMIO_QUEUE_NUM:
	case VIRTIO_MMIO_QUEUE_READY:
	case VIRTIO_MMIO_QUEUE_DESC_LOW: case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW: case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
	case VIRTIO_MMIO_QUEUE_USED_LOW: case VIRTIO_MMIO_QUEUE_USED_HIGH:
		write_queue_reg(m, offset, val);
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		/* Normally KVM's ioeventfd takes these without an exit; one that
		 * reaches here (no ioeventfd, or an index it did not match) goes
		 * the same way, so device work still never runs on a vCPU. */
		if (val < m->ops->nr_queues)
			kick_queue(m, val);
		else
			driver_mistake(m, &m->lim_kick, "notify for a queue that does not exist");
		break;
	case VIRTIO_MMIO_STATUS: write_status(m, (uint8_t)val); break;
	default:
		driver_mistake(m, &m->lim_register, "write to a read-only or unknown register ignored");
	}
}

static uint32_t reg_read(struct virtio_mmio *m, uint64_t offset)
{
	const struct vq *q = m->queue_sel < m->ops->nr_queues ? &m->queues[m->queue_sel] : NULL;

	switch (offset) {
	case VIRTIO_MMIO_MAGIC_VALUE: return MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION: return MMIO_VERSION;
	case VIRTIO_MMIO_DEVICE_ID: return m->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID: return MAYFLY_VIRTIO_VENDOR_ID;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return m->device_features_sel > 1 ? 0 :
		       (uint32_t)(m->device_features >> (32 * m->device_features_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX: return q ? m->ops->queue_max : 0;
	case VIRTIO_MMIO_QUEUE_READY: return q ? q->ready : 0;
	case VIRTIO_MMIO_STATUS: return m->status;
	case VIRTIO_MMIO_CONFIG_GENERATION: return m->config_generation;
	case VIRTIO_MMIO_SHM_LEN_LOW: case VIRTIO_MMIO_SHM_LEN_HIGH:
		return 0xffffffff;   /* no shared memory regions */
	default: return 0;
	}
}

void virtio_mmio_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write)
{
	struct virtio_mmio *m = opaque;
	uint32_t val = 0;

	if (offset >= MMIO_CONFIG) {
		uint64_t off = offset - MMIO_CONFIG;

		/* Config space: any width; writes are ignored (nothing writable offered). */
		if (is_write)
			return;
		memset(data, 0, len);
		if (off < m->ops->config_size && len <= m->ops->config_size - off) {
			pthread_mutex_lock(&m->lock);
			m->ops->config_read(m->dev, (uint32_t)off, data, len);
			pthread_mutex_unlock(&m->lock);
		}
		return;
	}
	/* Registers are 32-bit, aligned (virtio 1.2, 4.2.2.2). */
	if (len != 4 || (offset & 3)) {
		if (!is_write)
			memset(data, 0, len);
		driver_mistake(m, &m->lim_access, "register access not 32-bit aligned ignored");
		return;
	}
	/* The interrupt registers are on every interrupt's path: no lock, so a
	 * vCPU never waits behind disk I/O to take its interrupt. */
	if (offset == VIRTIO_MMIO_INTERRUPT_STATUS && !is_write) {
		val = atomic_load(&m->interrupt_status);
		memcpy(data, &val, 4);
		return;
	}
	if (offset == VIRTIO_MMIO_INTERRUPT_ACK && is_write) {
		memcpy(&val, data, 4);
		atomic_fetch_and(&m->interrupt_status, ~val);
		return;
	}
	pthread_mutex_lock(&m->lock);
	if (is_write) {
		memcpy(&val, data, 4);
		reg_write(m, offset, val);
	} else {
		val = reg_read(m, offset);
		memcpy(data, &val, 4);
	}
	pthread_mutex_unlock(&m->lock);
}

void virtio_mmio_kick(struct virtio_mmio *m, unsigned index)
{
	uint64_t count;

	/* Drain first: a kick arriving while we work fires the fd again. */
	if (read(m->kick_fds[index], &count, sizeof(count)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&m->lock);
	m->kicks++;
	if (virtio_mmio_live(m) && m->queues[index].ready)
		m->ops->queue_notify(m->dev, m, index);
	else
		driver_mistake(m, &m->lim_kick, "kick while the device is not live: ignored");
	pthread_mutex_unlock(&m->lock);
}

void virtio_mmio_kick_event(void *kicker, uint32_t events)
{
	struct virtio_mmio_kicker *k = kicker;

	(void)events;
	virtio_mmio_kick(k->m, k->index);
}

/* ---- snapshot ---- */

#define S_DEVICE_BITS (VIRTIO_CONFIG_S_FAILED | VIRTIO_CONFIG_S_NEEDS_RESET)
#define ISR_BITS      (VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG)

/* A status the table can reach: a step of the init sequence (or 0), with
 * or without FAILED (the driver may add it at any step) and NEEDS_RESET
 * (the device may). */
static bool status_reachable(uint32_t status)
{
	uint32_t step = status & ~(uint32_t)S_DEVICE_BITS;

	if (step == 0)
		return true;
	for (size_t i = 0; i < sizeof(status_steps) / sizeof(status_steps[0]); i++)
		if (status_steps[i].to == step)
			return true;
	return false;
}

int virtio_mmio_save(struct virtio_mmio *m, struct snap_out *o, const char **why)
{
	struct snap_out dev;
	int rc = 0;

	snap_out_init(&dev);
	pthread_mutex_lock(&m->lock);
	if (m->ops->save)
		rc = m->ops->save(m->dev, &dev, why);
	if (!rc) {
		snap_out_u32(o, m->ops->device_id);
		snap_out_u32(o, m->ops->nr_queues);
		snap_out_u64(o, m->device_features);
		snap_out_u64(o, m->driver_features);
		snap_out_u32(o, m->device_features_sel);
		snap_out_u32(o, m->driver_features_sel);
		snap_out_u32(o, m->queue_sel);
		snap_out_u32(o, m->status);
		snap_out_u32(o, atomic_load(&m->interrupt_status));
		snap_out_u32(o, m->config_generation);
		for (unsigned i = 0; i < m->ops->nr_queues; i++)
			vq_save(&m->queues[i], o);
		snap_out_put(o, dev.data, dev.len);
		rc = dev.err ? dev.err : o->err;
		if (rc)
			errmsg_why(why, rc, "virtio-%s %s: out of memory saving its state", m->ops->name,
				 m->name);
	}
	pthread_mutex_unlock(&m->lock);
	snap_out_free(&dev);
	return rc;
}

/* A decoded transport state, checked but not yet applied. */
struct mmio_snap {
	uint64_t driver_features;
	uint32_t device_features_sel, driver_features_sel, queue_sel;
	uint32_t status, interrupt_status, config_generation;
	struct vq queues[VIRTIO_MMIO_MAX_QUEUES];
};

/* Refuse a payload: `what` may be an earlier *why, so it is copied first. */
static int refuse(const struct virtio_mmio *m, const char **why, int rc, const char *what)
{
	char copy[200];

	snprintf(copy, sizeof(copy), "%s", what);
	return errmsg_why(why, rc, "virtio-%s %s: %s", m->ops->name, m->name, copy);
}

static int decode_queues(const struct virtio_mmio *m, struct snap_in *in, struct mmio_snap *s,
			 const char **why)
{
	bool event_idx = s->driver_features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
	char what[160];

	for (unsigned i = 0; i < m->ops->nr_queues; i++) {
		struct vq *q = &s->queues[i];
		const char *qwhy = "";

		if (vq_restore(q, in, m->mem, m->ops->queue_max, &qwhy))
			snprintf(what, sizeof(what), "corrupt snapshot state: queue %u: %s", i, qwhy);
		else if (q->ready && !(s->status & S_FOK))
			snprintf(what, sizeof(what), "corrupt snapshot state: queue %u ready before "
				 "FEATURES_OK", i);
		else if (q->ready && q->event_idx != event_idx)
			snprintf(what, sizeof(what), "corrupt snapshot state: queue %u: EVENT_IDX unlike "
				 "the driver features", i);
		else
			continue;
		return refuse(m, why, -EBADMSG, what);
	}
	return 0;
}

static int decode_transport(const struct virtio_mmio *m, struct snap_in *in, struct mmio_snap *s,
			    const char **why)
{
	uint32_t id = snap_in_u32(in), nr_queues = snap_in_u32(in);
	uint64_t features = snap_in_u64(in);
	char what[160];

	s->driver_features = snap_in_u64(in);
	s->device_features_sel = snap_in_u32(in);
	s->driver_features_sel = snap_in_u32(in);
	s->queue_sel = snap_in_u32(in);
	s->status = snap_in_u32(in);
	s->interrupt_status = snap_in_u32(in);
	s->config_generation = snap_in_u32(in);
	if (in->bad)
		return refuse(m, why, -EBADMSG, "snapshot state cut short");
	if (id != m->ops->device_id || nr_queues != m->ops->nr_queues) {
		snprintf(what, sizeof(what), "snapshot state of device id %u with %u queues, this "
			 "is id %u with %u", id, nr_queues, m->ops->device_id, m->ops->nr_queues);
		return refuse(m, why, -EINVAL, what);
	}
	if (features != m->device_features) {
		snprintf(what, sizeof(what), "the snapshot's device offered features 0x%llx, this "
			 "one offers 0x%llx", (unsigned long long)features,
			 (unsigned long long)m->device_features);
		return refuse(m, why, -EINVAL, what);
	}
	if (!status_reachable(s->status)) {
		snprintf(what, sizeof(what), "corrupt snapshot state: status 0x%x is not in the "
			 "virtio status table", s->status);
		return refuse(m, why, -EBADMSG, what);
	}
	if ((s->status & S_FOK) && !features_acceptable(s->driver_features, features))
		return refuse(m, why, -EBADMSG, "corrupt snapshot state: FEATURES_OK with driver "
			      "features the device did not offer, or without VERSION_1");
	if (s->interrupt_status & ~(uint32_t)ISR_BITS)
		return refuse(m, why, -EBADMSG, "corrupt snapshot state: unknown interrupt status bits");
	return decode_queues(m, in, s, why);
}

int virtio_mmio_restore(struct virtio_mmio *m, const void *data, size_t len, const char **why)
{
	struct mmio_snap *s;
	struct snap_in in;
	int rc;

	/* A struct vq is over 1 KiB: four of them do not belong on a stack. */
	s = calloc(1, sizeof(*s));
	if (!s)
		return refuse(m, why, -ENOMEM, "out of memory restoring its state");
	snap_in_init(&in, data, len);
	pthread_mutex_lock(&m->lock);
	/* Status 0: fresh, or reset (no queue is ready before FEATURES_OK). */
	if (m->status)
		rc = refuse(m, why, -EBUSY, "restore into a device the guest already uses");
	else
		rc = decode_transport(m, &in, s, why);
	if (!rc && m->ops->restore)
		rc = m->ops->restore(m->dev, &in, why);
	else if (!rc && !snap_in_end(&in))
		rc = refuse(m, why, -EBADMSG, "corrupt snapshot state: bytes after its end");
	if (rc)
		goto out_unlock;
	m->driver_features = s->driver_features;
	m->device_features_sel = s->device_features_sel;
	m->driver_features_sel = s->driver_features_sel;
	m->queue_sel = s->queue_sel;
	m->status = (uint8_t)s->status;
	atomic_store(&m->interrupt_status, s->interrupt_status);
	m->config_generation = s->config_generation;
	memcpy(m->queues, s->queues, sizeof(m->queues));
out_unlock:
	pthread_mutex_unlock(&m->lock);
	free(s);
	return rc;
}

void virtio_mmio_resume(struct virtio_mmio *m)
{
	pthread_mutex_lock(&m->lock);
	if (virtio_mmio_live(m))
		for (unsigned i = 0; i < m->ops->nr_queues; i++)
			if (m->queues[i].ready)
				kick_queue(m, i);
	if (atomic_load(&m->interrupt_status))
		signal_irq(m);
	pthread_mutex_unlock(&m->lock);
}
