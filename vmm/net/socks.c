/* socks.c - SOCKS5 on the guest's proxy port: the greeting and a CONNECT request parsed strictly, and the replies. */
#include "net/socks.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

enum { CMD_CONNECT = 1, ATYP_IPV4 = 1, ATYP_NAME = 3, ATYP_IPV6 = 4, METHOD_NONE = 0 };

int net_socks_greeting(const uint8_t *buf, size_t len, size_t *used)
{
	size_t n;

	if (len < 2)
		return len && buf[0] != NET_SOCKS_VERSION ? -EINVAL : -EAGAIN;
	if (buf[0] != NET_SOCKS_VERSION || !buf[1])
		return -EINVAL;
	n = 2 + (size_t)buf[1];
	if (len < n)
		return -EAGAIN;
	*used = n;
	return memchr(buf + 2, METHOD_NONE, buf[1]) ? 0 : -EACCES;
}

static int bad(uint8_t *code, uint8_t value, const char **why, const char *msg)
{
	*code = value;
	*why = msg;
	return -EINVAL;
}

int net_socks_request(const uint8_t *buf, size_t len, struct net_request *req, uint8_t *code,
		      const char **why)
{
	struct net_addr a;
	size_t addr_len, need;

	memset(req, 0, sizeof(*req));
	if (len >= 1 && buf[0] != NET_SOCKS_VERSION)
		return bad(code, NET_SOCKS_FAILURE, why, "not a SOCKS5 request");
	if (len < 5)
		return -EAGAIN;
	if (buf[1] != CMD_CONNECT)
		return bad(code, NET_SOCKS_BAD_COMMAND, why, "only SOCKS5 CONNECT is served");
	if (buf[2])
		return bad(code, NET_SOCKS_FAILURE, why, "a SOCKS5 request with a reserved byte set");
	switch (buf[3]) {
	case ATYP_IPV4:
		addr_len = 4;
		break;
	case ATYP_IPV6:
		addr_len = 16;
		break;
	case ATYP_NAME:
		addr_len = 1 + (size_t)buf[4];
		if (!buf[4] || buf[4] > NET_HOST_MAX)
			return bad(code, NET_SOCKS_FAILURE, why, "bad host name length");
		break;
	default:
		return bad(code, NET_SOCKS_BAD_ADDRESS_TYPE, why, "an unknown SOCKS5 address type");
	}
	need = 4 + addr_len + 2;
	if (len < need)
		return -EAGAIN;
	req->port = (uint16_t)(buf[need - 2] << 8 | buf[need - 1]);
	if (!req->port)
		return bad(code, NET_SOCKS_FAILURE, why, "the port must be 1-65535");
	if (buf[3] == ATYP_NAME) {
		memcpy(req->host, buf + 5, buf[4]);
		req->host[buf[4]] = '\0';
		/* A literal sent as a name is taken as the literal (socks5h
		 * clients do); anything else must be a name a rule could hold. */
		if (strlen(req->host) != buf[4] ||
		    (!net_addr_parse(req->host, &a) && !net_host_valid(req->host)))
			return bad(code, NET_SOCKS_FAILURE, why, "not a host name");
	} else {
		memset(&a, 0, sizeof(a));
		if (addr_len == 4) {
			a.b[10] = a.b[11] = 0xff;
			memcpy(a.b + 12, buf + 4, 4);
		} else {
			memcpy(a.b, buf + 4, 16);
		}
		net_addr_format(&a, req->host);
	}
	req->kind = NET_REQ_SOCKS;
	memcpy(req->method, "SOCKS5", sizeof("SOCKS5"));
	req->head_len = need;
	return 0;
}

void net_socks_reply(uint8_t code, uint8_t out[NET_SOCKS_REPLY_LEN])
{
	memset(out, 0, NET_SOCKS_REPLY_LEN);
	out[0] = NET_SOCKS_VERSION;
	out[1] = code;
	out[3] = ATYP_IPV4;
}

uint8_t net_socks_code(int status, int err)
{
	if (status == 403)
		return NET_SOCKS_NOT_ALLOWED;
	if (status != 502)
		return NET_SOCKS_FAILURE;
	switch (err) {
	case -ECONNREFUSED:
		return NET_SOCKS_REFUSED;
	case -EHOSTUNREACH:
		return NET_SOCKS_HOST_UNREACHABLE;
	case -ENETUNREACH:
		return NET_SOCKS_NET_UNREACHABLE;
	case -ETIMEDOUT:
		return NET_SOCKS_TTL_EXPIRED;
	default:
		return NET_SOCKS_FAILURE;
	}
}
