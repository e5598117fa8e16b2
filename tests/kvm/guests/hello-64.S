/* hello-64.S - a vmlinux-like ELF64 guest (no PVH note): entered in long mode; checks that, and RSI. */

	.code64
	.text
	.include "common.inc"

	.set ZERO_PAGE, 0x7000          /* where mayfly puts boot_params (layout.h) */
	.set MSR_EFER, 0xc0000080
	.set EFER_LMA, 1 << 10
	.set CR0_PG_BIT, 31

	.section .text.entry, "ax"
	.globl _start

/* Notes a vmlinux has without being a PVH kernel: a GNU build ID and a Xen
 * note of another type (XEN_ELFNOTE_GUEST_OS). Only type 18 means PVH, so
 * the VMM must still take the 64-bit entry. */
	.pushsection .note.Xen, "a", @note
	.balign 4
	.long 4, 8, 3                   /* namesz, descsz, NT_GNU_BUILD_ID */
	.asciz "GNU"
	.quad 0x796c66796d              /* any 8 bytes */
	.long 4, 6, 6                   /* namesz, descsz, XEN_ELFNOTE_GUEST_OS */
	.asciz "Xen"
	.asciz "linux"
	.balign 4
	.popsection

/* 64-bit entry at e_entry: long mode, identity paging, %rsi = zero page,
 * interrupts off. */
_start:
	cli
	mov %rsi, %r12                  /* a 64-bit register: keep all of RSI */
	mov $boot_stack_top, %rsp

	mov $msg_hello, %esi
	call serial_puts

	/* Long mode for real: EFER.LMA and CR0.PG set, and a 64-bit
	 * operation whose result differs from any 32-bit reading. */
	mov $MSR_EFER, %ecx
	rdmsr
	test $EFER_LMA, %eax
	jz 1f
	mov %cr0, %rax
	bt $CR0_PG_BIT, %rax
	jnc 1f
	movabs $0x0000000180000000, %rax
	shr $31, %rax
	cmp $3, %rax
	jne 1f
	mov $msg_long_ok, %esi
	jmp 2f
1:	mov $msg_long_bad, %esi
2:	call serial_puts

	cmp $ZERO_PAGE, %r12
	jne 3f
	mov $msg_rsi_ok, %esi
	call serial_puts
	jmp 4f
3:	mov $msg_rsi_bad, %esi
	call serial_puts
	mov %r12, %rcx
	shr $32, %rcx
	call serial_puthex
	mov %r12d, %ecx
	call serial_puthex
	mov $msg_nl, %esi
	call serial_puts

4:	call boot_timer_ready
	jmp guest_reset

	.section .rodata
msg_hello:	.asciz "hello from long mode\n"
msg_long_ok:	.asciz "long mode ok\n"
msg_long_bad:	.asciz "long mode bad\n"
msg_rsi_ok:	.asciz "rsi ok\n"
msg_rsi_bad:	.asciz "rsi bad: "
msg_nl:		.asciz "\n"

	.section .note.GNU-stack, "", @progbits
