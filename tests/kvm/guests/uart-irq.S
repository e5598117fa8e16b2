/* uart-irq.S - takes COM1's interrupts the way Linux's 8250 driver does: OUT2 set, IRQ 4 through the IOAPIC to the local APIC.
 *
 * Output:
 *   armed
 *   thre irq ok              IER.THRI raised IRQ 4 and IIR said THRI (else "thre irq bad iir: ...")
 *   rx irq: C                IER.RDI raised IRQ 4 for the byte C from stdin (else "rx irq bad iir: ...")
 *   irqs: 2                  one interrupt per cause: no storm, none lost
 * then a reset. With no interrupt within about 3 s, the local APIC timer
 * prints "no uart interrupt" and resets: the guest never hangs.
 *
 * Every other guest polls COM1, so only this one notices a VMM that drives
 * the wrong line, or none: a Linux guest's console then stalls waiting for THRE.
 * The 8259 PICs are masked (as Linux does once it uses the IOAPIC), so IRQ 4
 * can only arrive through the IOAPIC redirection entry programmed below.
 */

	.code32
	.text
	.include "common.inc"

	.set COM1_IER,          COM1 + 1
	.set COM1_IIR,          COM1 + 2
	.set COM1_MCR,          COM1 + 4
	.set IER_RDI,           0x01
	.set IER_THRI,          0x02
	.set IIR_ID_MASK,       0x0f
	.set IIR_THRI,          0x02
	.set IIR_RDI,           0x04
	.set MCR_OUT2,          0x08            /* gates the UART's IRQ on a PC */
	.set PIC1_DATA,         0x21
	.set PIC2_DATA,         0xa1
	.set IOAPIC_SEL,        0xfec00000
	.set IOAPIC_WIN,        0xfec00010
	.set IOAPIC_RTE4,       0x10 + 2 * 4    /* COM1 is ISA IRQ 4: pin 4 */
	.set LAPIC_EOI,         0xfee000b0
	.set LAPIC_SVR,         0xfee000f0
	.set LAPIC_LVT_TIMER,   0xfee00320
	.set LAPIC_TIMER_INIT,  0xfee00380
	.set LAPIC_TIMER_DIV,   0xfee003e0
	.set SVR_ENABLE,        0x1ff           /* software enable, spurious vector 0xff */
	.set TIMER_DIV_1,       0x0b
	.set WATCHDOG_TICKS,    0xc0000000      /* KVM's APIC bus: 1 GHz, so ~3.2 s */
	.set VEC_UART,          0x34
	.set VEC_WATCHDOG,      0x40
	.set SEL_CODE32,        0x08
	.set SEL_DATA,          0x10
	.set GATE_INTR32,       0x8e00          /* present, DPL 0, 32-bit interrupt gate */

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

_start:
	cli
	cld
	mov $boot_stack_top, %esp
	lgdt gdt_ptr                    /* gates need a code selector we know */
	ljmp $SEL_CODE32, $1f
1:	mov $SEL_DATA, %eax
	mov %eax, %ds
	mov %eax, %es
	mov %eax, %ss
	mov $uart_isr, %eax
	mov $(idt + VEC_UART * 8), %edi
	call set_gate
	mov $watchdog_isr, %eax
	mov $(idt + VEC_WATCHDOG * 8), %edi
	call set_gate
	lidt idt_ptr

	mov $0xff, %al                  /* both 8259s masked: the IOAPIC only */
	out %al, $PIC1_DATA
	out %al, $PIC2_DATA
	movl $SVR_ENABLE, LAPIC_SVR
	movl $TIMER_DIV_1, LAPIC_TIMER_DIV
	movl $VEC_WATCHDOG, LAPIC_LVT_TIMER     /* one-shot, unmasked */
	movl $WATCHDOG_TICKS, LAPIC_TIMER_INIT
	movl $(IOAPIC_RTE4 + 1), IOAPIC_SEL
	movl $0, IOAPIC_WIN             /* destination: APIC ID 0 (the BSP) */
	movl $IOAPIC_RTE4, IOAPIC_SEL
	movl $VEC_UART, IOAPIC_WIN      /* fixed, physical, active high, edge, unmasked */

	mov $msg_armed, %esi
	call serial_puts
	mov $COM1_MCR, %dx
	mov $MCR_OUT2, %al
	out %al, %dx

	/* THR is empty: enabling THRI must raise the line at once. */
	mov $COM1_IER, %dx
	mov $IER_THRI, %al
	out %al, %dx
	mov $1, %ecx
	call wait_irqs
	mov irq_iir, %ecx
	and $IIR_ID_MASK, %ecx
	cmp $IIR_THRI, %ecx
	jne thre_bad
	mov $msg_thre_ok, %esi
	call serial_puts

	/* The byte from stdin may be there already or still on its way. */
	mov $COM1_IER, %dx
	mov $IER_RDI, %al
	out %al, %dx
	mov $2, %ecx
	call wait_irqs
	mov irq_iir, %ecx
	and $IIR_ID_MASK, %ecx
	cmp $IIR_RDI, %ecx
	jne rx_bad
	mov $msg_rx, %esi
	call serial_puts
	movb irq_byte, %bl
	call serial_putc
	mov $'\n', %bl
	call serial_putc

	mov $msg_irqs, %esi
	call serial_puts
	mov irq_count, %ecx
	call serial_putdec
	mov $'\n', %bl
	call serial_putc
	jmp guest_reset

thre_bad:
	mov $msg_thre_bad, %esi
	jmp 1f
rx_bad:
	mov $msg_rx_bad, %esi
1:	call serial_puts
	mov irq_iir, %ecx
	call serial_puthex
	mov $'\n', %bl
	call serial_putc
	jmp guest_reset

/* set_gate: point the 8-byte IDT entry at %edi to the handler in %eax.
 * Clobbers %eax. */
set_gate:
	mov %ax, (%edi)
	movw $SEL_CODE32, 2(%edi)
	movw $GATE_INTR32, 4(%edi)
	shr $16, %eax
	mov %ax, 6(%edi)
	ret

/* wait_irqs: halt until irq_count reaches %ecx. sti's one-instruction
 * shadow covers the hlt, so an interrupt cannot slip in between the check
 * and the halt. Returns with interrupts off. This loop is the only place
 * interrupts are on, so a handler ends by coming back to its head. */
wait_irqs:
wait_irqs_loop:
	cli
	cmp %ecx, irq_count
	jae 1f
	sti
	hlt
	jmp wait_irqs_loop
1:	ret

/* The UART's handler: what IIR says (reading it acknowledges THRE), the byte
 * if one came, then IER cleared so the line drops and the main code's own
 * output raises nothing. It does not iret: kvm_pvm runs guest kernel code
 * through KVM's instruction emulator, which emulates iret in real mode only
 * ("instruction emulation failed"). It drops its frame (EIP, CS, EFLAGS: no
 * privilege change) and goes back to wait_irqs' head, where the interrupt
 * came from; the gate left interrupts off, as the loop's cli would. */
uart_isr:
	push %eax
	push %edx
	mov $COM1_IIR, %dx
	in %dx, %al
	movzbl %al, %eax
	mov %eax, irq_iir
	and $IIR_ID_MASK, %al
	cmp $IIR_RDI, %al
	jne 1f
	mov $COM1, %dx
	in %dx, %al
	mov %al, irq_byte
1:	mov $COM1_IER, %dx
	xor %al, %al
	out %al, %dx
	incl irq_count
	movl $0, LAPIC_EOI
	pop %edx
	pop %eax
	add $12, %esp
	jmp wait_irqs_loop

watchdog_isr:
	mov $msg_timeout, %esi
	call serial_puts
	jmp guest_reset

	.section .rodata
	.balign 8
gdt:
	.quad 0
	.quad 0x00cf9a000000ffff        /* 0x08: flat 32-bit code */
	.quad 0x00cf92000000ffff        /* 0x10: flat data */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.long gdt
idt_ptr:
	.word 256 * 8 - 1
	.long idt
msg_armed:	.asciz "armed\n"
msg_thre_ok:	.asciz "thre irq ok\n"
msg_thre_bad:	.asciz "thre irq bad iir: "
msg_rx:		.asciz "rx irq: "
msg_rx_bad:	.asciz "rx irq bad iir: "
msg_irqs:	.asciz "irqs: "
msg_timeout:	.asciz "no uart interrupt\n"

	.section .bss
	.balign 8
idt:
	.skip 256 * 8
irq_count:
	.skip 4
irq_iir:
	.skip 4
irq_byte:
	.skip 1

	.section .note.GNU-stack, "", @progbits
