/* flood.S - writes 144 KiB to COM1 (more than mayfly's 64 KiB buffer and a 64 KiB pipe hold), then reports boot and resets. */

	.code32
	.text
	.include "common.inc"

	.set COM1_FCR,     COM1 + 2
	.set FCR_FIFO_ON,  0x07         /* enable and clear both 16-byte FIFOs */
	.set FIFO_SIZE,    16
	.set FLOOD_LINES,  2304         /* of 64 bytes: 144 KiB */

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

/* Used with stdout never read: the vCPU must not block on host output, so
 * the boot timer write (logged with -v) and the reset must still happen.
 * Like Linux's 8250 driver it fills the transmit FIFO 16 bytes at a time
 * after each THRE, which halves the VM exits (they are slow in the nested
 * harness: about 0.3 ms each). */
_start:
	cli
	mov $boot_stack_top, %esp
	mov $COM1_FCR, %dx
	mov $FCR_FIFO_ON, %al
	out %al, %dx

	mov $FLOOD_LINES, %ebp
1:	mov $msg_line, %esi
	mov $(msg_line_end - msg_line), %ecx
	call serial_write_fifo
	dec %ebp
	jnz 1b
	mov $msg_done, %esi
	call serial_puts
	call boot_timer_ready
	jmp guest_reset

/* serial_write_fifo: write %ecx bytes (a multiple of 16) from %esi, 16 after
 * each THRE. Clobbers %eax, %ecx, %edx, %esi, %edi. */
serial_write_fifo:
	mov $COM1_LSR, %dx
1:	in %dx, %al
	test $LSR_THR_EMPTY, %al
	jz 1b
	mov $COM1, %dx
	mov $FIFO_SIZE, %edi
2:	movb (%esi), %al
	out %al, %dx
	inc %esi
	dec %edi
	jnz 2b
	sub $FIFO_SIZE, %ecx
	jnz serial_write_fifo
	ret

	.section .rodata
msg_line:	.ascii "flood flood flood flood flood flood flood flood flood flood flo\n"
msg_line_end:
msg_done:	.asciz "flood done\n"

	.section .note.GNU-stack, "", @progbits
