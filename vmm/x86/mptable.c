/* mptable.c - Intel MultiProcessor Specification 1.4 table: how a guest without ACPI finds its CPUs and IOAPIC. */
#include "cpu.h"
#include "layout.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* Chosen over ACPI's MADT because it is one small table with no AML, no
 * RSDP/RSDT/XSDT chain, and Linux (CONFIG_X86_MPPARSE) brings every listed
 * CPU online from it; docs/boot.md gives the full reasoning. */

#define MP_IOAPIC_PINS   24
#define MP_APIC_VERSION  0x14
#define MP_IOAPIC_VERSION 0x11
#define MP_CPU_SIGNATURE 0x600    /* family 6 */
#define MP_CPU_FEATURES  0x201    /* FPU | APIC */

enum { MP_PROCESSOR = 0, MP_BUS = 1, MP_IOAPIC = 2, MP_INTSRC = 3, MP_LINTSRC = 4 };
enum { MP_INT = 0, MP_NMI = 1, MP_EXTINT = 3 };

struct mpf_intel {           /* floating pointer */
	char signature[4];   /* "_MP_" */
	uint32_t physptr;
	uint8_t length;      /* in 16-byte units */
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct mpc_table {           /* configuration table header */
	char signature[4];   /* "PCMP" */
	uint16_t length;
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t oemcount;
	uint32_t lapic;
	uint32_t reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature, featureflag, reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {          /* also used for local interrupt entries */
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

_Static_assert(sizeof(struct mpf_intel) == 16, "MP floating pointer is 16 bytes");
_Static_assert(sizeof(struct mpc_table) == 44, "MP table header is 44 bytes");
_Static_assert(sizeof(struct mpc_cpu) == 20, "MP processor entry is 20 bytes");
_Static_assert(sizeof(struct mpc_intsrc) == 8, "MP interrupt entry is 8 bytes");

static uint8_t checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum += *b++;
	return (uint8_t)-sum;
}

/* Append one entry at *off in buf, refusing to run past the end. */
static int put(uint8_t *buf, size_t cap, size_t *off, const void *entry, size_t len)
{
	if (len > cap - *off)
		return -E2BIG;
	memcpy(buf + *off, entry, len);
	*off += len;
	return 0;
}

int mptable_write(const struct guest_mem *mem, unsigned nr_cpus)
{
	uint8_t buf[8192];   /* 254 CPUs need about 5.3 KiB */
	size_t off = sizeof(struct mpf_intel) + sizeof(struct mpc_table);
	uint8_t ioapic_id = (uint8_t)nr_cpus;
	uint16_t entries = 0;
	struct mpf_intel mpf = { .signature = { '_', 'M', 'P', '_' }, .length = 1,
				 .specification = 4 };
	struct mpc_table mpc = { .signature = { 'P', 'C', 'M', 'P' }, .spec = 4,
				 .oem = "MAYFLY  ", .productid = "MICROVM     ",
				 .lapic = (uint32_t)LAYOUT_LAPIC };
	int rc = 0;

	if (nr_cpus == 0 || nr_cpus > 254)
		return -E2BIG;
	memset(buf, 0, sizeof(buf));
	for (unsigned i = 0; i < nr_cpus && !rc; i++, entries++) {
		struct mpc_cpu cpu = { .type = MP_PROCESSOR, .apicid = (uint8_t)i,
				       .apicver = MP_APIC_VERSION,
				       .cpuflag = (uint8_t)(1 | (i == 0 ? 2 : 0)), /* enabled, BSP */
				       .cpufeature = MP_CPU_SIGNATURE,
				       .featureflag = MP_CPU_FEATURES };

		rc = put(buf, sizeof(buf), &off, &cpu, sizeof(cpu));
	}
	if (!rc) {
		struct mpc_bus bus = { .type = MP_BUS, .busid = 0,
				       .bustype = { 'I', 'S', 'A', ' ', ' ', ' ' } };
		struct mpc_ioapic ioapic = { .type = MP_IOAPIC, .apicid = ioapic_id,
					     .apicver = MP_IOAPIC_VERSION, .flags = 1,
					     .apicaddr = (uint32_t)LAYOUT_IOAPIC };

		rc = put(buf, sizeof(buf), &off, &bus, sizeof(bus));
		if (!rc)
			rc = put(buf, sizeof(buf), &off, &ioapic, sizeof(ioapic));
		entries += 2;
	}
	/* ISA IRQ n arrives on IOAPIC pin n, with bus-default polarity/trigger. */
	for (uint8_t pin = 0; pin < MP_IOAPIC_PINS && !rc; pin++, entries++) {
		struct mpc_intsrc src = { .type = MP_INTSRC, .irqtype = MP_INT,
					  .srcbus = 0, .srcbusirq = pin,
					  .dstapic = ioapic_id, .dstirq = pin };

		rc = put(buf, sizeof(buf), &off, &src, sizeof(src));
	}
	if (!rc) {
		/* The 8259 reaches every LAPIC's LINT0 as ExtINT; NMI on LINT1. */
		struct mpc_intsrc lint0 = { .type = MP_LINTSRC, .irqtype = MP_EXTINT,
					    .dstapic = 0xff, .dstirq = 0 };
		struct mpc_intsrc lint1 = { .type = MP_LINTSRC, .irqtype = MP_NMI,
					    .dstapic = 0xff, .dstirq = 1 };

		rc = put(buf, sizeof(buf), &off, &lint0, sizeof(lint0));
		if (!rc)
			rc = put(buf, sizeof(buf), &off, &lint1, sizeof(lint1));
		entries += 2;
	}
	if (rc)
		return rc;

	mpc.length = (uint16_t)(off - sizeof(mpf));
	mpc.oemcount = entries;
	memcpy(buf + sizeof(mpf), &mpc, sizeof(mpc));
	buf[sizeof(mpf) + offsetof(struct mpc_table, checksum)] =
		checksum(buf + sizeof(mpf), mpc.length);

	mpf.physptr = (uint32_t)(LAYOUT_MPTABLE + sizeof(mpf));
	mpf.checksum = checksum(&mpf, sizeof(mpf));
	memcpy(buf, &mpf, sizeof(mpf));

	if (off > LAYOUT_MPTABLE_MAX)
		return -E2BIG;
	return mem_write(mem, LAYOUT_MPTABLE, buf, off) ? -EFAULT : 0;
}
