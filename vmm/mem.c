/* mem.c - guest RAM mapping and checked gpa -> hva translation. */
#include "mem.h"
#include "x86/layout.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

int mem_init(struct guest_mem *mem, uint64_t bytes)
{
	uint64_t low;
	void *p;

	memset(mem, 0, sizeof(*mem));
	if (bytes == 0 || (bytes & (LAYOUT_PAGE_SIZE - 1)))
		return -EINVAL;
	/* NORESERVE: the guest touches pages lazily; untouched RAM costs nothing. */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* Guest RAM never needs to be in a core dump of the VMM. */
	madvise(p, bytes, MADV_DONTDUMP);
	mem->base = p;
	mem->total = bytes;

	low = bytes < LAYOUT_MMIO_HOLE_START ? bytes : LAYOUT_MMIO_HOLE_START;
	mem->regions[0] = (struct mem_region){ 0, low, mem->base };
	mem->nr_regions = 1;
	if (bytes > low) {
		mem->regions[1] = (struct mem_region){
			LAYOUT_HIGH_RAM_START, bytes - low, mem->base + low };
		mem->nr_regions = 2;
	}
	return 0;
}

void mem_init_fake(struct guest_mem *mem, void *host, uint64_t bytes)
{
	memset(mem, 0, sizeof(*mem));
	mem->total = bytes;
	mem->regions[0] = (struct mem_region){ 0, bytes, host };
	mem->nr_regions = 1;
}

void mem_free(struct guest_mem *mem)
{
	if (mem->base)
		munmap(mem->base, mem->total);
	memset(mem, 0, sizeof(*mem));
}

void *mem_gpa_to_hva(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	uint64_t last;

	if (len == 0)
		len = 1;
	if (__builtin_add_overflow(gpa, len - 1, &last))
		return NULL;
	for (int i = 0; i < mem->nr_regions; i++) {
		const struct mem_region *r = &mem->regions[i];

		if (gpa >= r->gpa && last - r->gpa < r->size && gpa - r->gpa < r->size)
			return r->hva + (gpa - r->gpa);
	}
	return NULL;
}

int mem_write(const struct guest_mem *mem, uint64_t gpa, const void *src, uint64_t len)
{
	void *dst = mem_gpa_to_hva(mem, gpa, len);

	if (!dst)
		return -EFAULT;
	if (len)
		memcpy(dst, src, len);
	return 0;
}

int mem_read(const struct guest_mem *mem, uint64_t gpa, void *dst, uint64_t len)
{
	const void *src = mem_gpa_to_hva(mem, gpa, len);

	if (!src)
		return -EFAULT;
	if (len)
		memcpy(dst, src, len);
	return 0;
}

uint64_t mem_low_end(const struct guest_mem *mem)
{
	return mem->regions[0].gpa + mem->regions[0].size;
}
