/* test_i8042.c - the controller only resets on 0xFE and otherwise reads as idle. */
#include <criterion/criterion.h>
#include <string.h>

#include "devices/i8042.h"

static int resets;
static struct i8042 dev;

static void on_reset(void *opaque)
{
	cr_assert_eq(opaque, &resets, "reset gets the opaque it was given");
	resets++;
}

static void setup(void)
{
	resets = 0;
	i8042_init(&dev, on_reset, &resets);
}

static void cmd(uint8_t val)
{
	i8042_cmd_io(&dev, 0, &val, 1, true);
}

TestSuite(i8042, .init = setup);

Test(i8042, reset_command_resets_once_per_write)
{
	cmd(0xfe);
	cr_assert_eq(resets, 1);
	cmd(0xfe);
	cr_assert_eq(resets, 2);
}

/* Linux's BOOT_KBD: kb_wait() until status bit 1 is clear, then 0xFE. */
Test(i8042, linux_reboot_sequence)
{
	uint8_t status = 0xff;
	int spins = 0;

	do {
		i8042_cmd_io(&dev, 0, &status, 1, false);
	} while ((status & 0x02) && ++spins < 10);
	cr_assert_eq(spins, 0, "input buffer reads empty at once");
	cmd(0xfe);
	cr_assert_eq(resets, 1);
}

Test(i8042, status_and_data_read_zero)
{
	uint8_t buf[4];

	memset(buf, 0xaa, sizeof(buf));
	i8042_cmd_io(&dev, 0, buf, 1, false);
	cr_assert_eq(buf[0], 0);
	cr_assert_eq(buf[1], 0xaa, "no write past len");
	memset(buf, 0xaa, sizeof(buf));
	i8042_data_io(&dev, 0, buf, 4, false);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(buf[i], 0);
	cmd(0x20);
	i8042_cmd_io(&dev, 0, buf, 1, false);
	cr_assert_eq(buf[0], 0, "no reply is ever queued");
	cr_assert_eq(resets, 0);
}

Test(i8042, other_commands_do_not_reset)
{
	static const uint8_t cmds[] = { 0x00, 0x20, 0x60, 0xaa, 0xad, 0xae,
					0xd1, 0xd3, 0xf0, 0xfd, 0xff };

	for (size_t i = 0; i < sizeof(cmds); i++)
		cmd(cmds[i]);
	cr_assert_eq(resets, 0);
}

Test(i8042, data_port_writes_do_not_reset)
{
	uint8_t v = 0xfe;

	i8042_data_io(&dev, 0, &v, 1, true);
	cr_assert_eq(resets, 0);
}

Test(i8042, odd_accesses_are_safe)
{
	uint8_t v = 0xfe;

	i8042_cmd_io(&dev, 1, &v, 1, true);
	cr_assert_eq(resets, 0, "offset outside the one-byte port");
	i8042_cmd_io(&dev, 0, &v, 0, true);
	cr_assert_eq(resets, 0, "zero-length write");
	i8042_init(&dev, NULL, NULL);
	cmd(0xfe);
	cr_assert_eq(resets, 0, "no reset hook: ignored");
}
