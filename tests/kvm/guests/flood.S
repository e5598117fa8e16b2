/* flood.S - writes 256 KiB to COM1 (more than the VMM and a pipe buffer hold), then reports boot and resets. */

	.code32
	.text
	.include "common.inc"

	.set FLOOD_LINES, 4096          /* of 64 bytes each */

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

/* Used with stdout never read: the vCPU must not block on host output, so
 * the boot timer write (logged with -v) and the reset must still happen. */
_start:
	cli
	mov $boot_stack_top, %esp
	mov $FLOOD_LINES, %ebp
1:	mov $msg_line, %esi
	call serial_puts
	dec %ebp
	jnz 1b
	mov $msg_done, %esi
	call serial_puts
	call boot_timer_ready
	jmp guest_reset

	.section .rodata
msg_line:	.ascii "flood flood flood flood flood flood flood flood flood flood flo\n"
		.byte 0
msg_done:	.asciz "flood done\n"

	.section .note.GNU-stack, "", @progbits
