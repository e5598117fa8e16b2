/* triple-fault.S - a PVH guest that says so, then triple faults: mayfly must exit 6. */

	.code32
	.text
	.include "common.inc"

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

_start:
	cli
	mov $boot_stack_top, %esp
	mov $msg_fault, %esi
	call serial_puts
	jmp guest_triple_fault

	.section .rodata
msg_fault:	.asciz "about to fault\n"

	.section .note.GNU-stack, "", @progbits
