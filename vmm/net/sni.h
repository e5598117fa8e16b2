/* sni.h - the server name in a guest client's TLS ClientHello: a pure, bounded parser of hostile bytes. */
#ifndef MAYFLY_NET_SNI_H
#define MAYFLY_NET_SNI_H

#include <stddef.h>
#include <stdint.h>

#include "net/rules.h"

#define NET_TLS_RECORD_MAX 16384       /* a TLS plaintext record's payload, at most */
#define NET_HELLO_MAX      (5 + NET_TLS_RECORD_MAX)

/* Pure: find the host_name of the server_name extension in the ClientHello
 * that starts buf[0, len). Returns
 *   0        found: sni holds it, lowercase (validated like a rule's name);
 *   -EAGAIN  the first record is not all in yet: read more (never past
 *            NET_HELLO_MAX bytes);
 *   -ENOENT  a well-formed ClientHello without a server name;
 *   -EINVAL  anything else (not a TLS handshake record, a length that
 *            does not fit what holds it, a ClientHello split over several
 *            records, two server_name extensions or names, a name that is
 *            not a host name), with *why one short line. */
int net_sni_parse(const uint8_t *buf, size_t len, char sni[NET_HOST_MAX + 1], const char **why);

#endif
