/* echo.S - copies COM1 input back to COM1 until a 'q', to show host stdin reaches the guest. */

	.code32
	.text
	.include "common.inc"

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

/* Prints "ready\n", echoes every byte it receives except the final 'q'
 * (polling LSR, no interrupts), then prints "bye\n" and resets. */
_start:
	cli
	mov $boot_stack_top, %esp
	mov $msg_ready, %esi
	call serial_puts
1:	call serial_getc
	cmp $'q', %al
	je 2f
	mov %al, %bl
	call serial_putc
	jmp 1b
2:	mov $msg_bye, %esi
	call serial_puts
	jmp guest_reset

	.section .rodata
msg_ready:	.asciz "ready\n"
msg_bye:	.asciz "bye\n"

	.section .note.GNU-stack, "", @progbits
