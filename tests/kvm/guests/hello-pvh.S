/* hello-pvh.S - the smallest PVH guest: print on COM1, check the start info, report boot, reset. */

	.code32
	.text
	.include "common.inc"

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

/* PVH entry: 32-bit protected mode, paging off, flat segments, %ebx = the
 * hvm_start_info. */
_start:
	cli
	mov $boot_stack_top, %esp
	mov %ebx, %ebp                  /* keep the start info pointer */

	mov $msg_hello, %esi
	call serial_puts

	cmpl $PVH_START_MAGIC, (%ebp)
	jne 1f
	mov $msg_start_ok, %esi
	call serial_puts
	jmp 2f
1:	mov $msg_start_bad, %esi
	call serial_puts
	mov %ebp, %ecx
	call serial_puthex
	mov $msg_nl, %esi
	call serial_puts

2:	call boot_timer_ready
	jmp guest_reset

	.section .rodata
msg_hello:	.asciz "hello from pvh\n"
msg_start_ok:	.asciz "start info ok\n"
msg_start_bad:	.asciz "start info bad: ebx="
msg_nl:		.asciz "\n"

	.section .note.GNU-stack, "", @progbits
