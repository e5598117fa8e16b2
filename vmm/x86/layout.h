/* layout.h - every guest-physical address and fixed hardware number mayfly uses on x86-64. */
#ifndef MAYFLY_X86_LAYOUT_H
#define MAYFLY_X86_LAYOUT_H

#define LAYOUT_PAGE_SIZE        0x1000ULL

/* Low memory, below 1 MiB. Everything the VMM writes for boot lives here. */
#define LAYOUT_GDT              0x500ULL     /* boot GDT: null, code64, data, tss */
#define LAYOUT_IDT              0x520ULL     /* empty IDT (limit 0) */
#define LAYOUT_PVH_START_INFO   0x6000ULL    /* hvm_start_info for PVH entry */
#define LAYOUT_PVH_MEMMAP       0x6100ULL    /* hvm_memmap_table_entry[] after it */
#define LAYOUT_PVH_MEMMAP_MAX   32
#define LAYOUT_PVH_MODLIST      0x6400ULL    /* hvm_modlist_entry (initrd), past a full memmap */
#define LAYOUT_ZERO_PAGE        0x7000ULL    /* struct boot_params */
#define LAYOUT_BOOT_STACK       0x8ff0ULL    /* initial RSP for a 64-bit entry */
#define LAYOUT_PML4             0x9000ULL    /* identity page tables: PML4 */
#define LAYOUT_PDPT             0xa000ULL    /*   one PDPT */
#define LAYOUT_PD               0xb000ULL    /*   four PDs: 4 GiB in 2 MiB pages */
#define LAYOUT_PD_COUNT         4
#define LAYOUT_CMDLINE          0x20000ULL   /* kernel command line */
#define LAYOUT_CMDLINE_MAX      2048ULL      /* bytes including the NUL: Linux x86 COMMAND_LINE_SIZE */
#define LAYOUT_EBDA_START       0x9fc00ULL   /* MP table lives here; e820 reserves it */
#define LAYOUT_LOW_RAM_END      0xa0000ULL   /* VGA hole starts here */
#define LAYOUT_BIOS_START       0xf0000ULL   /* reserved system ROM area */
#define LAYOUT_MPTABLE          0xf0000ULL   /* MP floating pointer + config table (Linux scans here) */
#define LAYOUT_MPTABLE_MAX      0x10000ULL
#define LAYOUT_HIMEM_START      0x100000ULL  /* 1 MiB: bzImage protected-mode code */

/* The 32-bit hole: RAM stops at 3 GiB and resumes at 4 GiB. */
#define LAYOUT_MMIO_HOLE_START  0xc0000000ULL
#define LAYOUT_HIGH_RAM_START   0x100000000ULL
/* Guest RAM's slots for mem_init (a struct mem_layout initializer). */
#define LAYOUT_RAM_SLOTS        { 2, { { 0, LAYOUT_MMIO_HOLE_START }, { LAYOUT_HIGH_RAM_START, 0 } } }

/* MMIO devices inside the hole. */
#define LAYOUT_BOOT_TIMER       0xd0000000ULL  /* guest writes BOOT_TIMER_MAGIC here */
#define LAYOUT_BOOT_TIMER_SIZE  0x1000ULL
#define LAYOUT_VIRTIO_MMIO      0xd0001000ULL  /* virtio-mmio window, 4 KiB a device */
#define LAYOUT_VIRTIO_MMIO_SIZE 0x1000ULL
#define LAYOUT_VIRTIO_MAX_DEVICES 10
#define LAYOUT_VIRTIO_IRQ_BASE  5             /* ISA lines 5..14: edge, active high (MP table) */
#define LAYOUT_VIRTIO_ADDR(i)   (LAYOUT_VIRTIO_MMIO + (uint64_t)(i) * LAYOUT_VIRTIO_MMIO_SIZE)
#define LAYOUT_VIRTIO_IRQ(i)    (LAYOUT_VIRTIO_IRQ_BASE + (unsigned)(i))
#define LAYOUT_KVM_IDENTITY_MAP 0xfffbc000ULL  /* one page KVM needs on Intel (real mode) */
#define LAYOUT_KVM_TSS          0xfffbd000ULL  /* three pages KVM needs on Intel */
#define LAYOUT_IOAPIC           0xfec00000ULL
#define LAYOUT_LAPIC            0xfee00000ULL

/* Selectors of the boot GDT at LAYOUT_GDT. 0x10/0x18 are what the 64-bit
 * Linux boot protocol names __BOOT_CS/__BOOT_DS; PVH enters through 0x08. */
#define LAYOUT_GDT_CODE32       0x08
#define LAYOUT_GDT_CODE64       0x10
#define LAYOUT_GDT_DATA         0x18
#define LAYOUT_GDT_TSS          0x20
#define LAYOUT_GDT_ENTRIES      5

/* Legacy ports and ISA interrupt lines. */
#define LAYOUT_COM1_PORT        0x3f8
#define LAYOUT_COM1_IRQ         4
#define LAYOUT_I8042_PORT       0x60          /* data; command/status at 0x64 */
#define LAYOUT_I8042_CMD_PORT   0x64

/* Largest guest RAM accepted by --mem, in MiB (512 GiB). */
#define LAYOUT_MEM_MAX_MIB      (512ULL * 1024)

#endif
