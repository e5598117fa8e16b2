/* uart_spec.h - 16550A register offsets and bits from the data sheet, for the UART tests (test_serial.c, test_device_snapshot.c). */
#ifndef MAYFLY_TEST_UART_SPEC_H
#define MAYFLY_TEST_UART_SPEC_H

/* Spelled out here rather than shared with the model, so the tests check
 * the spec. */
#define RBR 0
#define THR 0
#define DLL 0
#define IER 1
#define DLM 1
#define IIR 2
#define FCR 2
#define LCR 3
#define MCR 4
#define LSR 5
#define MSR 6
#define SCR 7

#define IER_RDI   0x01
#define IER_THRI  0x02
#define IER_RLSI  0x04
#define MCR_DTR   0x01
#define MCR_RTS   0x02
#define MCR_OUT1  0x04
#define MCR_OUT2  0x08
#define MCR_LOOP  0x10
#define LSR_DR    0x01
#define LSR_OE    0x02
#define LSR_THRE  0x20
#define LSR_TEMT  0x40

#endif
