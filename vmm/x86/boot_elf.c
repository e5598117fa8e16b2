/* boot_elf.c - tell a kernel file's format apart and load ELF kernels (vmlinux, PVH) into guest RAM. */
#include "x86/boot.h"
#include "x86/layout.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* From Xen's public/elfnote.h: the 32-bit protected-mode entry of a PVH
 * kernel. Its presence is what makes a kernel PVH-bootable. */
#define XEN_ELFNOTE_PHYS32_ENTRY 18

/* Where the bzImage signature sits (boot.rst); only sniffed here. */
#define BZIMAGE_MAGIC_OFFSET 0x202

/* A vmlinux has four or five PT_LOAD segments. The cap keeps the pairwise
 * overlap check cheap against a file with 65534 program headers. */
#define ELF_MAX_LOADS 32

/* A program or section header reduced to what we use, whatever the class. */
struct elf_seg {
	uint32_t type;
	uint64_t offset;
	uint64_t vaddr;
	uint64_t paddr;
	uint64_t filesz;
	uint64_t memsz;
	uint64_t align;
};

/* The ELF header fields we use, once validated. */
struct elf_file {
	const uint8_t *data;
	size_t size;
	bool is64;
	uint64_t entry;
	uint64_t phoff;
	uint32_t phnum;
	uint64_t shoff;
	uint32_t shnum;
	uint32_t shentsize;
};

/* Reasons that name a segment are formatted here: valid until the next
 * failed load on this thread, which is all a caller printing them needs. */
static __thread char elf_why_buf[96];

static const char *elf_why(const char *kind, unsigned int idx, const char *what)
{
	snprintf(elf_why_buf, sizeof(elf_why_buf), "ELF %s %u %s", kind, idx, what);
	return elf_why_buf;
}

/* True when [off, off + len) lies inside a file of `size` bytes. */
static bool elf_in_file(size_t size, uint64_t off, uint64_t len)
{
	return off <= size && len <= size - off;
}

static uint32_t elf_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int elf_parse_header(struct elf_file *ef, const char **why)
{
	const uint8_t *id = ef->data;
	uint32_t type, version, phentsize, want_phent, want_shent;

	if (ef->size < EI_NIDENT) {
		*why = "ELF header is truncated";
		return -ENOEXEC;
	}
	if (memcmp(id, ELFMAG, SELFMAG)) {
		*why = "not an ELF file";
		return -ENOEXEC;
	}
	if (id[EI_DATA] != ELFDATA2LSB) {
		*why = "ELF file is not little-endian";
		return -ENOEXEC;
	}
	if (id[EI_VERSION] != EV_CURRENT) {
		*why = "ELF identification has an unknown version";
		return -ENOEXEC;
	}

	/* Copy the header out: the image buffer carries no alignment promise.
	 * Both widths carry the same fields; only their sizes differ. */
#define READ_EHDR(Ehdr, Phdr, Shdr, machine, wrong_machine)		\
	do {								\
		Ehdr eh;						\
									\
		if (ef->size < sizeof(eh)) {				\
			*why = "ELF header is truncated";		\
			return -ENOEXEC;				\
		}							\
		memcpy(&eh, ef->data, sizeof(eh));			\
		if (eh.e_machine != (machine)) {			\
			*why = (wrong_machine);				\
			return -ENOEXEC;				\
		}							\
		type = eh.e_type;					\
		version = eh.e_version;					\
		ef->entry = eh.e_entry;					\
		ef->phoff = eh.e_phoff;					\
		ef->phnum = eh.e_phnum;					\
		phentsize = eh.e_phentsize;				\
		ef->shoff = eh.e_shoff;					\
		ef->shnum = eh.e_shnum;					\
		ef->shentsize = eh.e_shentsize;				\
		want_phent = sizeof(Phdr);				\
		want_shent = sizeof(Shdr);				\
	} while (0)

	if (id[EI_CLASS] == ELFCLASS64) {
		READ_EHDR(Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, EM_X86_64,
			  "64-bit ELF kernel is not for x86-64");
		ef->is64 = true;
	} else if (id[EI_CLASS] == ELFCLASS32) {
		/* Only a PVH kernel may be 32-bit; that is checked once notes are read. */
		READ_EHDR(Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, EM_386,
			  "32-bit ELF kernel is not for i386");
		ef->is64 = false;
#undef READ_EHDR
	} else {
		*why = "ELF class is neither 32- nor 64-bit";
		return -ENOEXEC;
	}

	/* Segments are loaded at their physical addresses, which only an
	 * executable promises; a relocatable object or DSO has none. */
	if (type != ET_EXEC) {
		*why = "ELF file is not an executable (ET_EXEC)";
		return -ENOEXEC;
	}
	if (version != EV_CURRENT) {
		*why = "ELF header has an unknown version";
		return -ENOEXEC;
	}
	if (ef->phnum == 0) {
		*why = "ELF file has no program headers";
		return -ENOEXEC;
	}
	/* PN_XNUM moves the real count into section 0; no kernel needs that. */
	if (ef->phnum == PN_XNUM) {
		*why = "ELF file uses extended program header numbering";
		return -EINVAL;
	}
	if (phentsize != want_phent) {
		*why = "ELF program header entry size is wrong";
		return -EINVAL;
	}
	/* phnum and phentsize are 16-bit, so their product cannot overflow;
	 * phoff + product can, which elf_in_file's subtraction form handles. */
	if (!elf_in_file(ef->size, ef->phoff, (uint64_t)ef->phnum * want_phent)) {
		*why = "ELF program headers lie outside the file";
		return -EINVAL;
	}
	/* Section headers are only read as a fallback for notes; an odd
	 * entry size there just means they are not used. */
	if (ef->shentsize != want_shent)
		ef->shnum = 0;
	return 0;
}

/* Header i, already known to lie inside the file. */
static void elf_read_phdr(const struct elf_file *ef, unsigned int i, struct elf_seg *s)
{
	if (ef->is64) {
		Elf64_Phdr ph;

		memcpy(&ph, ef->data + ef->phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		*s = (struct elf_seg){ ph.p_type, ph.p_offset, ph.p_vaddr, ph.p_paddr,
				       ph.p_filesz, ph.p_memsz, ph.p_align };
	} else {
		Elf32_Phdr ph;

		memcpy(&ph, ef->data + ef->phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		*s = (struct elf_seg){ ph.p_type, ph.p_offset, ph.p_vaddr, ph.p_paddr,
				       ph.p_filesz, ph.p_memsz, ph.p_align };
	}
}

static void elf_read_shdr(const struct elf_file *ef, unsigned int i, struct elf_seg *s)
{
	if (ef->is64) {
		Elf64_Shdr sh;

		memcpy(&sh, ef->data + ef->shoff + (uint64_t)i * sizeof(sh), sizeof(sh));
		*s = (struct elf_seg){ sh.sh_type, sh.sh_offset, sh.sh_addr, sh.sh_addr,
				       sh.sh_size, sh.sh_size, sh.sh_addralign };
	} else {
		Elf32_Shdr sh;

		memcpy(&sh, ef->data + ef->shoff + (uint64_t)i * sizeof(sh), sizeof(sh));
		*s = (struct elf_seg){ sh.sh_type, sh.sh_offset, sh.sh_addr, sh.sh_addr,
				       sh.sh_size, sh.sh_size, sh.sh_addralign };
	}
}

/*
 * Walk one note area, {namesz, descsz, type, name, desc} records with name
 * and desc padded to `align`, looking for Xen's PHYS32_ENTRY. Every length
 * is checked against what is left of the area before it is used, so a
 * lying namesz/descsz cannot move the cursor past the end.
 */
static int elf_scan_notes(const uint8_t *p, uint64_t len, uint64_t align,
			  bool *found, uint64_t *entry, const char **why)
{
	uint64_t pos = 0;

	while (len - pos >= 12) {
		uint32_t namesz = elf_le32(p + pos);
		uint32_t descsz = elf_le32(p + pos + 4);
		uint32_t type = elf_le32(p + pos + 8);
		/* 32-bit sizes padded in 64-bit arithmetic cannot overflow. */
		uint64_t name_pad = ((uint64_t)namesz + align - 1) & ~(align - 1);
		uint64_t desc_pad = ((uint64_t)descsz + align - 1) & ~(align - 1);
		const uint8_t *name, *desc;

		pos += 12;
		if (name_pad > len - pos || descsz > len - pos - name_pad) {
			*why = "ELF note runs past the end of its segment";
			return -EINVAL;
		}
		name = p + pos;
		desc = name + name_pad;
		if (namesz == 4 && !memcmp(name, "Xen", 4) &&
		    type == XEN_ELFNOTE_PHYS32_ENTRY && !*found) {
			uint64_t e;

			/* Linux emits it as .quad on some versions, .long on others. */
			if (descsz == 4) {
				e = elf_le32(desc);
			} else if (descsz == 8) {
				e = elf_le32(desc) | (uint64_t)elf_le32(desc + 4) << 32;
			} else {
				*why = "PVH entry note has a bad size";
				return -EINVAL;
			}
			if (e > UINT32_MAX) {
				*why = "PVH entry note points above 4 GiB";
				return -EINVAL;
			}
			*entry = e;
			*found = true;
		}
		pos += name_pad;
		/* The last note's desc padding may be cut off by the area's end. */
		pos += desc_pad < len - pos ? desc_pad : len - pos;
	}
	return 0;
}

/* Find the PVH entry note in the PT_NOTE segments, or in SHT_NOTE
 * sections when the file has no PT_NOTE (some linkers only emit those). */
static int elf_find_pvh_entry(const struct elf_file *ef, bool *found, uint64_t *entry,
			      const char **why)
{
	bool have_pt_note = false;
	struct elf_seg s;
	uint64_t sh_bytes;
	int err;

	*found = false;
	for (unsigned int i = 0; i < ef->phnum; i++) {
		elf_read_phdr(ef, i, &s);
		if (s.type != PT_NOTE)
			continue;
		have_pt_note = true;
		if (!elf_in_file(ef->size, s.offset, s.filesz)) {
			*why = elf_why("note segment", i, "lies outside the file");
			return -EINVAL;
		}
		err = elf_scan_notes(ef->data + s.offset, s.filesz, s.align == 8 ? 8 : 4,
				     found, entry, why);
		if (err)
			return err;
	}
	if (have_pt_note || ef->shoff == 0 || ef->shnum == 0)
		return 0;

	sh_bytes = (uint64_t)ef->shnum * ef->shentsize;
	if (!elf_in_file(ef->size, ef->shoff, sh_bytes)) {
		*why = "ELF section headers lie outside the file";
		return -EINVAL;
	}
	for (unsigned int i = 0; i < ef->shnum; i++) {
		elf_read_shdr(ef, i, &s);
		if (s.type != SHT_NOTE)
			continue;
		if (!elf_in_file(ef->size, s.offset, s.filesz)) {
			*why = elf_why("note section", i, "lies outside the file");
			return -EINVAL;
		}
		err = elf_scan_notes(ef->data + s.offset, s.filesz, s.align == 8 ? 8 : 4,
				     found, entry, why);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Validate every PT_LOAD before anything is written, so a bad file leaves
 * guest RAM untouched. A segment must come from inside the file, fit in
 * low guest RAM (the boot page tables map only the first 4 GiB) above the
 * boot structures below 1 MiB, and not overlap another segment.
 */
static int elf_collect_loads(const struct guest_mem *mem, const struct elf_file *ef,
			     struct elf_seg *loads, unsigned int *nr, const char **why)
{
	uint64_t low_end = mem_low_end(mem);
	unsigned int n = 0;

	for (unsigned int i = 0; i < ef->phnum; i++) {
		struct elf_seg s;
		uint64_t end;

		elf_read_phdr(ef, i, &s);
		if (s.type != PT_LOAD)
			continue;
		if (!elf_in_file(ef->size, s.offset, s.filesz)) {
			*why = elf_why("segment", i, "lies outside the file");
			return -EINVAL;
		}
		if (s.filesz > s.memsz) {
			*why = elf_why("segment", i, "has more file bytes than memory bytes");
			return -EINVAL;
		}
		if (s.memsz == 0)
			continue;	/* occupies nothing; not a place to enter */
		if (s.memsz > mem->total) {
			*why = elf_why("segment", i, "is larger than guest RAM");
			return -EINVAL;
		}
		if (__builtin_add_overflow(s.paddr, s.memsz, &end)) {
			*why = elf_why("segment", i, "wraps around the address space");
			return -EINVAL;
		}
		if (s.paddr < LAYOUT_HIMEM_START) {
			*why = elf_why("segment", i, "overlaps the boot area below 1 MiB");
			return -EINVAL;
		}
		if (!mem_gpa_to_hva(mem, s.paddr, s.memsz)) {
			*why = elf_why("segment", i, "lies outside guest RAM");
			return -EINVAL;
		}
		if (end > low_end) {
			*why = elf_why("segment", i, "lies above 4 GiB, beyond the boot page tables");
			return -EINVAL;
		}
		for (unsigned int j = 0; j < n; j++) {
			if (s.paddr < loads[j].paddr + loads[j].memsz && loads[j].paddr < end) {
				*why = elf_why("segment", i, "overlaps an earlier segment");
				return -EINVAL;
			}
		}
		if (n == ELF_MAX_LOADS) {
			*why = "ELF file has too many PT_LOAD segments";
			return -EINVAL;
		}
		loads[n++] = s;
	}
	if (n == 0) {
		*why = "ELF file has no loadable segment";
		return -ENOEXEC;
	}
	*nr = n;
	return 0;
}

/*
 * The physical entry: e_entry as is when it falls in a segment's physical
 * range (vmlinux links startup_64 at its physical address), otherwise
 * translated through the segment whose virtual range holds it. A PVH
 * entry is physical by definition and never translated.
 */
static bool elf_entry_phys(const struct elf_seg *loads, unsigned int n, uint64_t entry,
			   bool may_translate, uint64_t *phys)
{
	for (unsigned int i = 0; i < n; i++) {
		if (entry >= loads[i].paddr && entry - loads[i].paddr < loads[i].memsz) {
			*phys = entry;
			return true;
		}
	}
	if (!may_translate)
		return false;
	for (unsigned int i = 0; i < n; i++) {
		if (entry >= loads[i].vaddr && entry - loads[i].vaddr < loads[i].memsz) {
			*phys = loads[i].paddr + (entry - loads[i].vaddr);
			return true;
		}
	}
	return false;
}

int boot_load_elf(const struct guest_mem *mem, const uint8_t *image, size_t size,
		  struct kernel_image *out, const char **why)
{
	struct elf_seg loads[ELF_MAX_LOADS];
	struct elf_file ef = { .data = image, .size = size };
	uint64_t pvh_entry = 0, entry, start = UINT64_MAX, end = 0;
	const char *unused;
	unsigned int n = 0;
	bool pvh;
	int err;

	if (!why)
		why = &unused;
	memset(out, 0, sizeof(*out));
	if (!image)
		ef.size = 0;

	err = elf_parse_header(&ef, why);
	if (err)
		return err;
	err = elf_find_pvh_entry(&ef, &pvh, &pvh_entry, why);
	if (err)
		return err;
	if (!ef.is64 && !pvh) {
		*why = "32-bit ELF kernel has no PVH entry note";
		return -ENOEXEC;
	}
	err = elf_collect_loads(mem, &ef, loads, &n, why);
	if (err)
		return err;
	if (!elf_entry_phys(loads, n, pvh ? pvh_entry : ef.entry, !pvh, &entry)) {
		*why = pvh ? "PVH entry point lies outside every loaded segment"
			   : "ELF entry point lies outside every loaded segment";
		return -EINVAL;
	}

	for (unsigned int i = 0; i < n; i++) {
		/* Checked in elf_collect_loads; cannot fail now. */
		uint8_t *dst = mem_gpa_to_hva(mem, loads[i].paddr, loads[i].memsz);

		memcpy(dst, image + loads[i].offset, loads[i].filesz);
		/* Guest RAM may be reused; bss must read as zero regardless. */
		memset(dst + loads[i].filesz, 0, loads[i].memsz - loads[i].filesz);
		if (loads[i].paddr < start)
			start = loads[i].paddr;
		if (loads[i].paddr + loads[i].memsz > end)
			end = loads[i].paddr + loads[i].memsz;
	}

	out->format = pvh ? KERNEL_PVH : KERNEL_ELF64;
	out->entry = entry;
	out->load_start = start;
	out->load_end = end;
	/* No setup header to limit it: any low RAM a 64-bit or PVH kernel
	 * can reach through its identity map will do. */
	out->initrd_addr_max = LAYOUT_MMIO_HOLE_START - 1;
	return 0;
}

int boot_load_kernel(const struct guest_mem *mem, const uint8_t *image, size_t size,
		     struct kernel_image *out, const char **why)
{
	const char *unused;

	if (!why)
		why = &unused;
	memset(out, 0, sizeof(*out));
	if (!image || size == 0) {
		*why = "kernel file is empty";
		return -ENOEXEC;
	}
	if (size >= SELFMAG && !memcmp(image, ELFMAG, SELFMAG))
		return boot_load_elf(mem, image, size, out, why);
	if (size >= BZIMAGE_MAGIC_OFFSET + 4 && !memcmp(image + BZIMAGE_MAGIC_OFFSET, "HdrS", 4))
		return boot_load_bzimage(mem, image, size, out, why);
	*why = "not an ELF or bzImage kernel";
	return -ENOEXEC;
}
