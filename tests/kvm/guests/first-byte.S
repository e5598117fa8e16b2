/* first-byte.S - for startup benchmarks: one line ("X") on COM1 as early as possible, then reset. */

	.code32
	.text
	.include "common.inc"

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

_start:
	cli
	mov $boot_stack_top, %esp
	mov $'X', %bl
	call serial_putc
	mov $'\n', %bl
	call serial_putc
	jmp guest_reset_nowait

	.section .note.GNU-stack, "", @progbits
