/* fuzz_virtio.h - what the virtio fuzz targets share: guest RAM between guard zones, and a driver's register writes (virtio 1.2, 3.1.1). */
#ifndef MAYFLY_FUZZ_VIRTIO_H
#define MAYFLY_FUZZ_VIRTIO_H

#include "fuzz_common.h"
#include "virtio/mmio.h"

/* After mmio.h: it defines VIRTIO_MMIO_VENDOR_ID (the value) and so does
 * <linux/virtio_mmio.h> (the register offset); in this order the second
 * definition, in a system header, is not an error. */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>

/* Guest RAM of `ram_size` bytes between two guard zones (guards_set,
 * guards_intact). Page-aligned like real guest RAM, which queue.c's atomics
 * rely on. */
#define FUZZ_ARENA(ram_size, guard_size)			\
	static struct {						\
		uint8_t lo[guard_size];				\
		uint8_t ram[ram_size];				\
		uint8_t hi[guard_size];				\
	} arena __attribute__((aligned(4096)))

static inline void fuzz_reg_write(struct virtio_mmio *m, uint64_t offset, uint32_t val)
{
	uint8_t buf[4];

	memcpy(buf, &val, 4);
	virtio_mmio_io(m, offset, buf, 4, true);
}

/* Reset, ACKNOWLEDGE, DRIVER, then every feature offered in the low word
 * (EVENT_IDX only if event_idx) and VERSION_1, and FEATURES_OK. */
static inline void fuzz_negotiate(struct virtio_mmio *m, bool event_idx)
{
	uint8_t buf[4];
	uint32_t low;

	fuzz_reg_write(m, VIRTIO_MMIO_STATUS, 0);
	fuzz_reg_write(m, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	fuzz_reg_write(m, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	fuzz_reg_write(m, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	virtio_mmio_io(m, VIRTIO_MMIO_DEVICE_FEATURES, buf, 4, false);
	memcpy(&low, buf, 4);
	if (!event_idx)
		low &= ~(1u << VIRTIO_RING_F_EVENT_IDX);
	fuzz_reg_write(m, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fuzz_reg_write(m, VIRTIO_MMIO_DRIVER_FEATURES, low);
	fuzz_reg_write(m, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fuzz_reg_write(m, VIRTIO_MMIO_DRIVER_FEATURES, 1u << (VIRTIO_F_VERSION_1 - 32));
	fuzz_reg_write(m, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
					      VIRTIO_CONFIG_S_FEATURES_OK);
}

/* Queue q of `size` at these guest addresses, then QUEUE_READY. */
static inline void fuzz_queue_setup(struct virtio_mmio *m, unsigned q, uint16_t size,
				    uint64_t desc, uint64_t avail, uint64_t used)
{
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_SEL, q);
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_NUM, size);
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(avail >> 32));
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(used >> 32));
	fuzz_reg_write(m, VIRTIO_MMIO_QUEUE_READY, 1);
}

static inline void fuzz_driver_ok(struct virtio_mmio *m)
{
	fuzz_reg_write(m, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
					      VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
}

#endif
