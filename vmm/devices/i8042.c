/* i8042.c - the PS/2 controller reduced to its reset line: command 0xFE ends the VM. */
#include "i8042.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <string.h>

#define I8042_CMD_RESET_CPU 0xfe   /* pulse the output port's reset line */

/*
 * Why no replies: a command such as 0x20 (read command byte) or 0xAA
 * (self-test) expects a byte at port 0x60 with OBF set in the status.
 * Answering those gets Linux's i8042 driver past controller init into its
 * AUX probe, which polls for two more replies (AUX loopback, AUX test),
 * 0.5 s each with interrupts off unless we fake those too, and then into
 * keyboard probing. Staying silent fails the driver at its first command
 * instead: one 0.5 s timeout, then it gives up.
 * A guest kernel built without CONFIG_SERIO_I8042 never asks at all.
 */

void i8042_init(struct i8042 *dev, i8042_reset_fn reset, void *opaque)
{
	dev->reset = reset;
	dev->opaque = opaque;
}

/* Reads return 0: no output byte; writes (keyboard commands) are dropped. */
void i8042_data_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write)
{
	(void)opaque;
	(void)offset;
	if (!is_write)
		memset(data, 0, len);
}

/* Status 0: output buffer empty and input buffer empty, so Linux's kb_wait()
 * before its reboot write returns at once. */
void i8042_cmd_io(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write)
{
	struct i8042 *dev = opaque;

	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	/* Linux writes 0xFE up to ten times if the first does not stop the
	 * CPU; each write asks again and the reset hook must be idempotent. */
	if (offset == 0 && len >= 1 && data[0] == I8042_CMD_RESET_CPU && dev->reset)
		dev->reset(dev->opaque);
}

void i8042_save(const struct i8042 *dev, struct snap_out *o)
{
	(void)dev;
	(void)o;
}

int i8042_restore(struct i8042 *dev, const void *data, size_t len, const char **why)
{
	(void)dev;
	(void)data;
	if (len)
		return errmsg_why(why, -EBADMSG, "corrupt i8042 section: %zu bytes, want 0", len);
	return 0;
}
