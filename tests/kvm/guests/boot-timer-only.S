/* boot-timer-only.S - the least a guest can do: report boot to the boot timer and reset, no output. */

	.code32
	.text
	.include "common.inc"

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

_start:
	cli
	mov $boot_stack_top, %esp
	call boot_timer_ready
	jmp guest_reset

	.section .note.GNU-stack, "", @progbits
