/* boot_fixture.h - the boot tests' shared fixture: fake guest RAM, and builders of small ELF, PVH and bzImage kernels. */
#ifndef MAYFLY_TEST_BOOT_FIXTURE_H
#define MAYFLY_TEST_BOOT_FIXTURE_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mem/mem.h"
#include "x86/boot.h"

#define RAM_SIZE (64ULL << 20)
#define MIB      (1ULL << 20)
#define GIB      (1ULL << 30)

/* The guest's RAM, RAM_SIZE bytes zeroed for each test of suite "boot"
 * (boot_fixture.c declares the suite and its init/fini). */
extern uint8_t *ram;
extern struct guest_mem mem;

/* Images are built here, then copied into an exact-size heap block before
 * loading so ASan catches any read past the end of the file. */
#define IMG_CAP 0x10000
extern uint8_t img[IMG_CAP];

/* boot_load_kernel on an exact-size copy of src[0..size) into mem. */
int load_exact(const uint8_t *src, size_t size, struct kernel_image *k, const char **why);
/* True when ram[gpa..gpa+len) is all zero. */
bool ram_zero(uint64_t gpa, uint64_t len);
/* A rejected file must say why, with one of the two codes, and leave
 * guest RAM untouched (everything is validated before the first write). */
void expect_reject(const uint8_t *src, size_t size);

/* An ELF note at p; returns its padded size. */
size_t put_note(uint8_t *p, const char *name, uint32_t type, const void *desc, uint32_t descsz);

#define E64 ((Elf64_Ehdr *)img)
#define P64(i) ((Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)) + (i))
#define E32 ((Elf32_Ehdr *)img)
#define P32(i) ((Elf32_Phdr *)(img + sizeof(Elf32_Ehdr)) + (i))

#define SEG0_OFF   0x1000
#define SEG0_PADDR 0x200000ULL
#define SEG0_VADDR 0xffffffff80200000ULL
#define SEG0_FILE  0x1000
#define SEG0_MEM   0x3000
#define SEG1_OFF   0x2000
#define SEG1_PADDR 0x400000ULL
#define SEG1_FILE  0x800
#define NOTE_OFF   0x2800

/* vmlinux-alike in img: text+bss at 2 MiB, data at 4 MiB, and a PVH note
 * note_width (4 or 8) bytes wide unless 0. Returns the file size. */
size_t make_elf64(int note_width);

/* A 32-bit PVH kernel at 1 MiB; the note in a PT_NOTE, in a SHT_NOTE
 * section only, or absent. */
enum note_where { NOTE_NONE, NOTE_SEGMENT, NOTE_SECTION };
size_t make_elf32(enum note_where where);

#define BZ_SETUP_SECTS 4
#define BZ_KERNEL_OFF  ((BZ_SETUP_SECTS + 1) * 512)
#define BZ_KERNEL_SIZE 0x1000
#define BZ_INIT_SIZE   0x200000

/* Little-endian stores into img at off. */
void put16(size_t off, uint16_t v);
void put32(size_t off, uint32_t v);
void put64(size_t off, uint64_t v);

/* A bzImage in img with a protocol 2.15 header laid out as Linux 6.1's and
 * kernel_size bytes of kernel after the setup sectors. Returns the file size. */
size_t make_bzimage(size_t kernel_size);

/* img[0..size) loaded by load_exact, which must succeed (asserts). */
struct kernel_image load_ok(size_t size);
/* make_elf64(0) loaded into mem (asserts it loads). */
struct kernel_image load_elf_kernel(void);

#endif
