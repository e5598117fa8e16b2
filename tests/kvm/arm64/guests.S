/* guests.S - tiny arm64 guests for arm64-guests.c: each is an arm64 Image
 * (the 64-byte header Linux's head.S writes, so the port's loader takes it
 * as it takes a kernel), entered at its first byte with the MMU off, so
 * every address here is PC-relative (adr) or an absolute MMIO constant.
 * They talk through byte stores to the UART's data register (an MMIO exit)
 * and end with a PSCI call (hvc #0), as Linux does. */

#define UART  0x09000000

/* w0 = a PSCI function id (hi:lo), then the call. */
.macro psci hi, lo
	movz	w0, #\lo
	movk	w0, #\hi, lsl #16
	hvc	#0
.endm

/* The Image header (Documentation/arm64/booting.rst): a branch over it,
 * text offset 0, the image's size, flags 0xa (little-endian, 4K pages,
 * anywhere in RAM), the magic. */
.macro image_header start, end
	b	. + 64
	.word	0
	.quad	0
	.quad	\end - \start
	.quad	0xa
	.quad	0, 0, 0
	.word	0x644d5241
	.word	0
.endm

/* Print the NUL-terminated string at label (clobbers x9-x11). */
.macro puts label
	mov	x9, #UART
	adr	x10, \label
1:	ldrb	w11, [x10], #1
	cbz	w11, 2f
	strb	w11, [x9]
	b	1b
2:
.endm

	.section .rodata
	.balign 4

/* hello: a line on the UART, then SYSTEM_OFF. */
	.globl guest_hello, guest_hello_end
guest_hello:
	image_header guest_hello, guest_hello_end
	puts	hello_msg
	psci	0x8400, 0x0008
	b	.
hello_msg:
	.asciz	"hello from arm64\n"
	.balign 4
guest_hello_end:

/* reset: SYSTEM_RESET, which ends the VM as a reboot does. */
	.globl guest_reset, guest_reset_end
guest_reset:
	image_header guest_reset, guest_reset_end
	psci	0x8400, 0x0009
	b	.
guest_reset_end:

/* smp: CPU_ON for the CPU with affinity 1 at cpu1_entry; it sets a flag
 * and turns itself off; the boot CPU waits (bounded) for the flag and
 * says what it saw. */
	.globl guest_smp, guest_smp_end
guest_smp:
	image_header guest_smp, guest_smp_end
	adr	x2, cpu1_entry
	mov	x1, #1
	mov	x3, #0
	psci	0xc400, 0x0003
	cbnz	x0, cpu_on_failed
	adr	x4, flag
	movz	x6, #0x100, lsl #16     /* 16M polls at most */
3:	ldr	w5, [x4]
	cbnz	w5, 4f
	subs	x6, x6, #1
	b.ne	3b
	puts	timeout_msg
	b	5f
4:	puts	smp_msg
5:	psci	0x8400, 0x0008
	b	.
cpu_on_failed:
	puts	fail_msg
	psci	0x8400, 0x0008
	b	.
cpu1_entry:
	adr	x4, flag
	mov	w5, #1
	str	w5, [x4]
	psci	0x8400, 0x0002
	b	.
	.balign 4
flag:
	.word	0
smp_msg:
	.asciz	"cpu1 up\n"
timeout_msg:
	.asciz	"cpu1 never ran\n"
fail_msg:
	.asciz	"CPU_ON failed\n"
	.balign 4
guest_smp_end:

	.section .note.GNU-stack, "", %progbits
