/* unclaimed.S - touches ports and MMIO no device claims: reads must be all ones, writes ignored, the VM must go on. */

	.code32
	.text
	.include "common.inc"

	/* Free in mayfly and in QEMU's microvm alike. */
	.set PORT8,  0x9999
	.set PORT16, 0x9a00
	.set PORT32, 0x9a04
	.set MMIO,   0xd8000000             /* in the MMIO hole, past the devices */
	.set ROUNDS, 3                      /* repeat: the VMM logs such accesses once */

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

/* Prints "unclaimed reads ff" when every read returned all ones, otherwise a
 * "unclaimed read bad: NAME=VALUE" line per bad read; then "still alive". */
_start:
	cli
	mov $boot_stack_top, %esp
	movl $ROUNDS, rounds_left

round:
	/* writes first, so a write that wrongly lands somewhere shows up in
	 * the reads that follow */
	mov $PORT8, %dx
	mov $0x5a, %al
	out %al, %dx
	mov $PORT16, %dx
	mov $0x5a5a, %ax
	out %ax, %dx
	mov $PORT32, %dx
	mov $0x5a5a5a5a, %eax
	out %eax, %dx
	mov $MMIO, %eax
	movl $0x5a5a5a5a, (%eax)
	movb $0x5a, 5(%eax)

	mov $PORT8, %dx
	in %dx, %al
	movzbl %al, %ecx
	mov $0xff, %edx
	mov $name_pio8, %esi
	call check_read

	mov $PORT16, %dx
	in %dx, %ax
	movzwl %ax, %ecx
	mov $0xffff, %edx
	mov $name_pio16, %esi
	call check_read

	mov $PORT32, %dx
	in %dx, %eax
	mov %eax, %ecx
	mov $0xffffffff, %edx
	mov $name_pio32, %esi
	call check_read

	mov $MMIO, %eax
	mov (%eax), %ecx
	mov $0xffffffff, %edx
	mov $name_mmio32, %esi
	call check_read

	mov $MMIO, %eax
	movzbl 5(%eax), %ecx
	mov $0xff, %edx
	mov $name_mmio8, %esi
	call check_read

	mov $MMIO, %eax
	movzwl 6(%eax), %ecx
	mov $0xffff, %edx
	mov $name_mmio16, %esi
	call check_read

	decl rounds_left
	jnz round

	cmpl $0, bad_reads
	jne 1f
	mov $msg_ff, %esi
	call serial_puts
1:	mov $msg_alive, %esi
	call serial_puts
	jmp guest_reset

/* check_read: %ecx = the value read, %edx = what it should be, %esi = its
 * name. Counts and prints a mismatch. Clobbers %eax, %ebx, %ecx, %edx,
 * %esi, %edi. */
check_read:
	cmp %edx, %ecx
	je 1f
	incl bad_reads
	mov %esi, %edi
	mov $msg_bad, %esi
	call serial_puts                /* keeps %ecx and %edi */
	mov %edi, %esi
	call serial_puts
	call serial_puthex
	mov $msg_nl, %esi
	call serial_puts
1:	ret

	.section .rodata
msg_ff:		.asciz "unclaimed reads ff\n"
msg_alive:	.asciz "still alive\n"
msg_bad:	.asciz "unclaimed read bad: "
msg_nl:		.asciz "\n"
name_pio8:	.asciz "port 0x9999 inb="
name_pio16:	.asciz "port 0x9a00 inw="
name_pio32:	.asciz "port 0x9a04 inl="
name_mmio32:	.asciz "mmio 0xd8000000 32-bit="
name_mmio8:	.asciz "mmio 0xd8000005 8-bit="
name_mmio16:	.asciz "mmio 0xd8000006 16-bit="

	.data
	.balign 4
rounds_left:	.long 0
bad_reads:	.long 0

	.section .note.GNU-stack, "", @progbits
