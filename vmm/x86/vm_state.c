/* vm_state.c - the VM-wide KVM state: PIC, IOAPIC, PIT and KVM clock; save, restore, encode and decode. */
#include "vm_state.h"
#include "lib/errmsg.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

_Static_assert(sizeof(struct kvm_irqchip) == 520, "kvm_irqchip layout");
_Static_assert(sizeof(struct kvm_pit_state2) == 112, "kvm_pit_state2 layout");
_Static_assert(sizeof(struct kvm_clock_data) == 48, "kvm_clock_data layout");

int vm_state_save(int vm_fd, struct vm_state *s, const char **why)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->pic_master.chip_id = KVM_IRQCHIP_PIC_MASTER;
	s->pic_slave.chip_id = KVM_IRQCHIP_PIC_SLAVE;
	s->ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
	rc = snap_ioctl(vm_fd, KVM_GET_PIT2, &s->pit, "KVM_GET_PIT2", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_GET_CLOCK, &s->clock, "KVM_GET_CLOCK", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_GET_IRQCHIP, &s->pic_master, "KVM_GET_IRQCHIP (PIC master)", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_GET_IRQCHIP, &s->pic_slave, "KVM_GET_IRQCHIP (PIC slave)", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_GET_IRQCHIP, &s->ioapic, "KVM_GET_IRQCHIP (IOAPIC)", why);
	return rc;
}

int vm_state_restore(int vm_fd, const struct vm_state *s, const char **why)
{
	struct kvm_clock_data clock = { .clock = s->clock.clock };
	int rc;

	rc = snap_ioctl(vm_fd, KVM_SET_PIT2, (void *)&s->pit, "KVM_SET_PIT2", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_SET_IRQCHIP, (void *)&s->pic_master, "KVM_SET_IRQCHIP (PIC master)", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_SET_IRQCHIP, (void *)&s->pic_slave, "KVM_SET_IRQCHIP (PIC slave)", why);
	if (!rc)
		rc = snap_ioctl(vm_fd, KVM_SET_IRQCHIP, (void *)&s->ioapic, "KVM_SET_IRQCHIP (IOAPIC)", why);
	return rc;
}

void vm_state_encode(const struct vm_state *s, struct snap_out *out)
{
	snap_out_put(out, &s->pic_master, sizeof(s->pic_master));
	snap_out_put(out, &s->pic_slave, sizeof(s->pic_slave));
	snap_out_put(out, &s->ioapic, sizeof(s->ioapic));
	snap_out_put(out, &s->pit, sizeof(s->pit));
	snap_out_put(out, &s->clock, sizeof(s->clock));
}

int vm_state_decode(struct vm_state *s, const void *data, size_t len, const char **why)
{
	struct snap_in in;

	snap_in_init(&in, data, len);
	snap_in_get(&in, &s->pic_master, sizeof(s->pic_master));
	snap_in_get(&in, &s->pic_slave, sizeof(s->pic_slave));
	snap_in_get(&in, &s->ioapic, sizeof(s->ioapic));
	snap_in_get(&in, &s->pit, sizeof(s->pit));
	snap_in_get(&in, &s->clock, sizeof(s->clock));
	if (!snap_in_end(&in))
		return errmsg_why(why, -EBADMSG, "corrupt vm section: %zu bytes, want %zu", len,
				sizeof(s->pic_master) * 3 + sizeof(s->pit) + sizeof(s->clock));
	if (s->pic_master.chip_id != KVM_IRQCHIP_PIC_MASTER ||
	    s->pic_slave.chip_id != KVM_IRQCHIP_PIC_SLAVE || s->ioapic.chip_id != KVM_IRQCHIP_IOAPIC)
		return errmsg_why(why, -EBADMSG, "corrupt vm section: irqchip ids %u, %u, %u",
				s->pic_master.chip_id, s->pic_slave.chip_id, s->ioapic.chip_id);
	return 0;
}
