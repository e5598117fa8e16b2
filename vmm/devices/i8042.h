/* i8042.h - just enough of the PS/2 controller for a guest's reboot (command 0xFE) to end the VM. */
#ifndef MAYFLY_DEVICES_I8042_H
#define MAYFLY_DEVICES_I8042_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/codec.h"

/* Called on a vCPU thread for every 0xFE written to the command port (a
 * rebooting Linux may write it up to ten times): must be idempotent, safe
 * from any thread, and must not block. */
typedef void (*i8042_reset_fn)(void *opaque);

struct i8042 {
	i8042_reset_fn reset;   /* may be NULL: reset requests are ignored */
	void *opaque;
};

void i8042_init(struct i8042 *dev, i8042_reset_fn reset, void *opaque);

/* Bus handlers: data port 0x60 and command/status port 0x64. Stateless, so
 * concurrent vCPUs need no lock. Status and data read 0 (nothing to read,
 * ready for input); commands other than 0xFE are ignored and never answered. */
void i8042_data_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write);
void i8042_cmd_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write);

/* Snapshot: the controller keeps no state (it answers nothing and only
 * watches for 0xFE), so its payload is empty. The section exists so that a
 * later controller with state gets a place, and a version bump, not a
 * silent guess. Save appends nothing; restore accepts only an empty
 * payload (else -EBADMSG with *why). */
void i8042_save(const struct i8042 *dev, struct snap_out *o);
int i8042_restore(struct i8042 *dev, const void *data, size_t len, const char **why)
	__attribute__((warn_unused_result));

#endif
