/* smp.S - the BSP starts every AP with INIT-SIPI-SIPI; each AP says hello; the BSP counts them.
 *
 * Output, in this order except that AP lines may come in any order:
 *   cpu0 up
 *   mptable cpus: N          (or "mptable: none" when no MP table is found)
 *   cpuK up                  one line per AP, K = its local APIC ID
 *   cpus up: M
 * M counts the BSP plus every AP that checked in, so "--cpus 2" must give
 * "cpus up: 2". The BSP finds the CPUs in the MP table (mayfly puts it in the
 * EBDA at 0x9fc00) and starts each enabled AP by its APIC ID, then waits
 * until all N-1 have checked in (bounded: 2^33 TSC ticks, a few seconds).
 * Without an MP table (QEMU's microvm has none) it broadcasts INIT-SIPI-SIPI
 * to all-but-self and waits a fixed 2^30 ticks.
 *
 * An AP starts in real mode at SIPI_VECTOR * 0x1000 (the trampoline copied to
 * 0x8000), loads the GDT below, enters 32-bit protected mode (no paging) and
 * runs ap_entry32 from the image; it prints under a spinlock, increments
 * ap_count and halts with interrupts off.
 */

	.code32
	.text
	.include "common.inc"

	.set LAPIC,             0xfee00000      /* xAPIC MMIO */
	.set LAPIC_ID,          LAPIC + 0x20    /* ID in bits 31:24 */
	.set LAPIC_SVR,         LAPIC + 0xf0
	.set LAPIC_ICR_LO,      LAPIC + 0x300
	.set LAPIC_ICR_HI,      LAPIC + 0x310   /* destination in bits 31:24 */
	.set SVR_ENABLE,        0x1ff           /* software enable, spurious vector 0xff */
	.set ICR_INIT,          0x00004500      /* delivery mode INIT, level assert */
	.set ICR_STARTUP,       0x00004600      /* delivery mode STARTUP, | vector */
	.set ICR_ALL_BUT_SELF,  0x000c0000      /* destination shorthand 11 */
	.set ICR_BUSY,          0x00001000      /* delivery status: send pending */
	.set AP_TRAMPOLINE,     0x8000          /* free low RAM in mayfly's layout */
	.set SIPI_VECTOR,       AP_TRAMPOLINE >> 12
	.set INIT_DELAY,        200000          /* pause loops, ~10 ms on hardware */
	.set SIPI_DELAY,        20000           /* ~200 us */
	.set MAX_CPUS,          64              /* APIC IDs 0..63 get a stack */
	.set AP_STACK_SIZE,     512
	.set WAIT_MP,           512             /* units of 2^24 TSC ticks */
	.set WAIT_NO_MP,        64
	.set SEL_CODE32,        0x08
	.set SEL_DATA,          0x10
	.set MP_FLOAT_SIG,      0x5f504d5f      /* "_MP_" */
	.set MP_CONFIG_SIG,     0x504d4350      /* "PCMP" */
	.set MP_CPU_ENABLED,    0x01
	.set MP_CPU_BSP,        0x02

	.section .text.entry, "ax"
	.globl _start
	PVH_NOTE _start

_start:
	cli
	cld
	mov $boot_stack_top, %esp

	mov LAPIC_ID, %ecx
	shr $24, %ecx
	mov %ecx, bsp_id
	call say_up

	/* Software-enable the local APIC before it sends IPIs. */
	mov LAPIC_SVR, %eax
	or $SVR_ENABLE, %eax
	mov %eax, LAPIC_SVR

	call mp_scan
	mov mp_cpus, %ecx
	test %ecx, %ecx
	jz 1f
	mov $msg_mp, %esi
	call serial_puts
	mov mp_cpus, %ecx
	call serial_putdec
	mov $msg_nl, %esi
	call serial_puts
	jmp 2f
1:	mov $msg_no_mp, %esi
	call serial_puts

2:	mov $ap_trampoline, %esi
	mov $AP_TRAMPOLINE, %edi
	mov $(ap_trampoline_end - ap_trampoline), %ecx
	rep movsb

	cmpl $0, mp_cpus
	je 4f
	movl $WAIT_MP, wait_limit
	xor %ebp, %ebp                  /* each AP the MP table lists */
3:	cmp ap_n, %ebp
	jae wait_aps
	movzbl ap_ids(%ebp), %esi
	xor %edi, %edi
	call start_ap
	inc %ebp
	jmp 3b
4:	movl $WAIT_NO_MP, wait_limit
	xor %esi, %esi
	mov $ICR_ALL_BUT_SELF, %edi
	call start_ap

wait_aps:
	rdtsc
	mov %eax, wait_start
	mov %edx, wait_start + 4
1:	mov mp_cpus, %ecx
	test %ecx, %ecx
	jz 2f                           /* no table: wait the whole time */
	dec %ecx
	cmp %ecx, ap_count
	jae 3f
2:	pause
	rdtsc
	sub wait_start, %eax
	sbb wait_start + 4, %edx
	shrd $24, %edx, %eax            /* elapsed ticks / 2^24 */
	cmp wait_limit, %eax
	jb 1b

3:	call serial_lock
	mov $msg_cpus, %esi
	call serial_puts
	mov ap_count, %ecx
	inc %ecx                        /* the BSP */
	call serial_putdec
	mov $msg_nl, %esi
	call serial_puts
	call serial_unlock
	jmp guest_reset

/* start_ap: INIT, STARTUP, STARTUP to APIC ID %esi, with the destination
 * shorthand bits in %edi (0 for "that ID"). Clobbers %eax, %ecx, %edx. */
start_ap:
	mov $ICR_INIT, %eax
	or %edi, %eax
	call lapic_ipi
	mov $INIT_DELAY, %ecx
	call spin_delay
	mov $(ICR_STARTUP | SIPI_VECTOR), %eax
	or %edi, %eax
	call lapic_ipi
	mov $SIPI_DELAY, %ecx
	call spin_delay
	mov $(ICR_STARTUP | SIPI_VECTOR), %eax
	or %edi, %eax
	call lapic_ipi
	mov $SIPI_DELAY, %ecx
	jmp spin_delay

/* lapic_ipi: send ICR low %eax to APIC ID %esi and wait (bounded) for
 * delivery. Clobbers %ecx, %edx. */
lapic_ipi:
	mov %esi, %edx
	shl $24, %edx
	mov %edx, LAPIC_ICR_HI
	mov %eax, LAPIC_ICR_LO          /* writing the low half sends */
	mov $1000000, %ecx
1:	testl $ICR_BUSY, LAPIC_ICR_LO
	jz 2f
	pause
	dec %ecx
	jnz 1b
2:	ret

/* spin_delay: %ecx pause loops. Clobbers %ecx. */
spin_delay:
1:	pause
	dec %ecx
	jnz 1b
	ret

/* mp_scan: find the MP floating pointer in the EBDA's first KiB or the BIOS
 * area, then walk its configuration table: count enabled processors into
 * mp_cpus and list the APIC IDs of the enabled APs (not the BSP, not us) in
 * ap_ids/ap_n. Leaves mp_cpus 0 when there is no valid table. Clobbers
 * %eax, %ecx, %edx, %esi, %edi. */
mp_scan:
	mov $0x9fc00, %esi
	mov $0xa0000, %edi
	call mp_find
	test %eax, %eax
	jnz 1f
	mov $0xf0000, %esi
	mov $0x100000, %edi
	call mp_find
	test %eax, %eax
	jz 9f
1:	mov 4(%eax), %esi               /* physical address of the config table */
	test %esi, %esi
	jz 9f                           /* a "default configuration": unsupported */
	cmpl $MP_CONFIG_SIG, (%esi)
	jne 9f
	movzwl 0x22(%esi), %ecx         /* entry count */
	add $0x2c, %esi                 /* first entry */
2:	test %ecx, %ecx
	jz 9f
	movzbl (%esi), %eax             /* entry type */
	test %eax, %eax
	jnz 4f
	testb $MP_CPU_ENABLED, 3(%esi)  /* processor entry, 20 bytes */
	jz 3f
	incl mp_cpus
	testb $MP_CPU_BSP, 3(%esi)
	jnz 3f
	movzbl 1(%esi), %edx            /* its local APIC ID */
	cmp bsp_id, %edx                /* never INIT ourselves */
	je 3f
	mov ap_n, %eax
	cmp $MAX_CPUS, %eax
	jae 3f
	movb %dl, ap_ids(%eax)
	incl ap_n
3:	add $20, %esi
	dec %ecx
	jmp 2b
4:	cmp $4, %eax                    /* bus, I/O APIC, interrupt entries: 8 bytes */
	ja 9f                           /* unknown type: stop */
	add $8, %esi
	dec %ecx
	jmp 2b
9:	ret

/* mp_find: the address of a "_MP_" structure with a valid checksum on a
 * 16-byte boundary in [%esi, %edi), or 0 in %eax. Clobbers %ecx, %edx, %esi. */
mp_find:
1:	cmp %edi, %esi
	jae 8f
	cmpl $MP_FLOAT_SIG, (%esi)
	jne 3f
	movzbl 8(%esi), %ecx            /* length in 16-byte units */
	shl $4, %ecx
	jz 3f
	xor %eax, %eax
	mov %esi, %edx
2:	add (%edx), %al
	inc %edx
	dec %ecx
	jnz 2b
	test %al, %al
	jnz 3f
	mov %esi, %eax
	ret
3:	add $16, %esi
	jmp 1b
8:	xor %eax, %eax
	ret

/* say_up: print "cpuN up" for N in %ecx. Clobbers everything but %ebp. */
say_up:
	mov $msg_cpu, %esi
	call serial_puts                /* keeps %ecx */
	call serial_putdec
	mov $msg_up, %esi
	jmp serial_puts

/* serial_lock / serial_unlock: a test-and-set spinlock around COM1 (and
 * dec_buf). Clobber %eax. */
serial_lock:
	mov $1, %eax
1:	xchg %eax, print_lock           /* xchg with memory is locked */
	test %eax, %eax
	jz 2f
	pause
	jmp 1b                          /* %eax is 1 again */
2:	ret

serial_unlock:
	movl $0, print_lock
	ret

/* The AP trampoline: real mode, CS = SIPI_VECTOR << 8, IP = 0. Copied to
 * AP_TRAMPOLINE, so it only refers to itself through that address. */
	.code16
ap_trampoline:
	cli
	xor %ax, %ax
	mov %ax, %ds
	lgdtl AP_TRAMPOLINE + (ap_gdtr - ap_trampoline)
	mov %cr0, %eax
	or $1, %eax                     /* PE */
	mov %eax, %cr0
	ljmpl $SEL_CODE32, $ap_entry32
	.balign 4
ap_gdtr:
	.word gdt_end - gdt - 1
	.long gdt
ap_trampoline_end:
	.code32

ap_entry32:
	mov $SEL_DATA, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	mov %ax, %fs
	mov %ax, %gs
	cld
	mov LAPIC_ID, %ebp
	shr $24, %ebp
	cmp $MAX_CPUS, %ebp
	jae ap_park                     /* no stack for it: it stays uncounted */
	lea 1(%ebp), %esp
	imul $AP_STACK_SIZE, %esp
	add $ap_stacks, %esp
	call serial_lock
	mov %ebp, %ecx
	call say_up
	call serial_unlock
	lock incl ap_count
ap_park:
	cli
	hlt
	jmp ap_park

	.section .rodata
	.balign 8
gdt:	/* accessed bits preset: loading a selector never writes the GDT */
	.quad 0
	.quad 0x00cf9b000000ffff        /* 0x08: 32-bit code, base 0, 4 GiB */
	.quad 0x00cf93000000ffff        /* 0x10: data, base 0, 4 GiB */
gdt_end:

msg_cpu:	.asciz "cpu"
msg_up:		.asciz " up\n"
msg_mp:		.asciz "mptable cpus: "
msg_no_mp:	.asciz "mptable: none\n"
msg_cpus:	.asciz "cpus up: "
msg_nl:		.asciz "\n"

	.data
	.balign 8
wait_start:	.quad 0
wait_limit:	.long 0
print_lock:	.long 0
ap_count:	.long 0
mp_cpus:	.long 0
bsp_id:		.long 0
ap_n:		.long 0
ap_ids:		.skip MAX_CPUS

	.bss
	.balign 16
ap_stacks:	.skip MAX_CPUS * AP_STACK_SIZE

	.section .note.GNU-stack, "", @progbits
