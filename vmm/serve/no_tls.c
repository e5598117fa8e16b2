/* no_tls.c - the GnuTLS entry points libmicrohttpd's static archive refers to, as stubs that fail: mayfly serve speaks plain HTTP only. */
/*
 * Debian's libmicrohttpd.a is built with HTTPS support and so refers to
 * 37 gnutls_* symbols. GnuTLS cannot be linked statically here (p11-kit,
 * which it needs, ships no static library), and mayfly is one static
 * binary. The service listens only on a Unix socket or on loopback, where
 * TLS buys nothing, and never passes MHD_USE_TLS. So these stand in for
 * GnuTLS: gnutls_global_init succeeds (libmicrohttpd's constructor calls
 * it at start-up and would otherwise refuse to work at all), every entry
 * point that sets up TLS fails with GNUTLS_E_UNIMPLEMENTED_FEATURE, so a
 * daemon started with MHD_USE_TLS fails cleanly (tests/unit/test_serve_http.c),
 * and those only reachable once a TLS session exists abort: they cannot run.
 */
#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>
#include <stdio.h>
#include <stdlib.h>

#define NO_TLS GNUTLS_E_UNIMPLEMENTED_FEATURE

/* Reached only through a TLS session, which cannot be made. */
static void __attribute__((noreturn)) unreachable(const char *fn)
{
	fprintf(stderr, "mayfly: internal error: %s called but mayfly has no TLS\n", fn);
	abort();
}

gnutls_alloc_function gnutls_malloc = malloc;

int gnutls_global_init(void) { return 0; }
void gnutls_global_deinit(void) { }
const char *gnutls_strerror(int error) { (void)error; return "TLS is not built into mayfly"; }

/* Set-up: fail, so MHD_start_daemon with MHD_USE_TLS returns NULL. */
int gnutls_priority_init(gnutls_priority_t *p, const char *prio, const char **err)
{ (void)p; (void)prio; if (err) *err = NULL; return NO_TLS; }
void gnutls_priority_deinit(gnutls_priority_t p) { (void)p; }
int gnutls_certificate_allocate_credentials(gnutls_certificate_credentials_t *res)
{ (void)res; return NO_TLS; }
void gnutls_certificate_free_credentials(gnutls_certificate_credentials_t sc) { (void)sc; }
int gnutls_psk_allocate_server_credentials(gnutls_psk_server_credentials_t *sc)
{ (void)sc; return NO_TLS; }
void gnutls_psk_free_server_credentials(gnutls_psk_server_credentials_t sc) { (void)sc; }
int gnutls_dh_params_init(gnutls_dh_params_t *dh) { (void)dh; return NO_TLS; }
void gnutls_dh_params_deinit(gnutls_dh_params_t dh) { (void)dh; }
int gnutls_dh_params_import_pkcs3(gnutls_dh_params_t p, const gnutls_datum_t *d,
				  gnutls_x509_crt_fmt_t f)
{ (void)p; (void)d; (void)f; return NO_TLS; }
int gnutls_certificate_set_x509_key_mem(gnutls_certificate_credentials_t r, const gnutls_datum_t *c,
					const gnutls_datum_t *k, gnutls_x509_crt_fmt_t t)
{ (void)r; (void)c; (void)k; (void)t; return NO_TLS; }
int gnutls_certificate_set_x509_key_mem2(gnutls_certificate_credentials_t r,
					 const gnutls_datum_t *c, const gnutls_datum_t *k,
					 gnutls_x509_crt_fmt_t t, const char *pass, unsigned flags)
{ (void)r; (void)c; (void)k; (void)t; (void)pass; (void)flags; return NO_TLS; }
int gnutls_certificate_set_x509_trust_mem(gnutls_certificate_credentials_t r,
					  const gnutls_datum_t *ca, gnutls_x509_crt_fmt_t t)
{ (void)r; (void)ca; (void)t; return NO_TLS; }
void gnutls_certificate_set_dh_params(gnutls_certificate_credentials_t r, gnutls_dh_params_t dh)
{ (void)r; (void)dh; }
void gnutls_certificate_set_retrieve_function2(gnutls_certificate_credentials_t c,
					       gnutls_certificate_retrieve_function2 *f)
{ (void)c; (void)f; }
void gnutls_certificate_set_retrieve_function3(gnutls_certificate_credentials_t c,
					       gnutls_certificate_retrieve_function3 *f)
{ (void)c; (void)f; }
void gnutls_psk_set_server_credentials_function(gnutls_psk_server_credentials_t c,
						gnutls_psk_server_credentials_function *f)
{ (void)c; (void)f; }

/* A session: never made, so nothing below can be reached. */
int gnutls_init(gnutls_session_t *s, unsigned int flags) { (void)s; (void)flags; return NO_TLS; }
void gnutls_deinit(gnutls_session_t s) { (void)s; }
int gnutls_credentials_set(gnutls_session_t s, gnutls_credentials_type_t t, void *c)
{ (void)s; (void)t; (void)c; unreachable(__func__); }
int gnutls_priority_set(gnutls_session_t s, gnutls_priority_t p)
{ (void)s; (void)p; unreachable(__func__); }
void gnutls_certificate_server_set_request(gnutls_session_t s, gnutls_certificate_request_t r)
{ (void)s; (void)r; unreachable(__func__); }
int gnutls_alpn_set_protocols(gnutls_session_t s, const gnutls_datum_t *p, unsigned n, unsigned f)
{ (void)s; (void)p; (void)n; (void)f; unreachable(__func__); }
void gnutls_session_set_ptr(gnutls_session_t s, void *p) { (void)s; (void)p; unreachable(__func__); }
void *gnutls_session_get_ptr(gnutls_session_t s) { (void)s; unreachable(__func__); }
void gnutls_transport_set_int2(gnutls_session_t s, int r, int w)
{ (void)s; (void)r; (void)w; unreachable(__func__); }
int gnutls_handshake(gnutls_session_t s) { (void)s; unreachable(__func__); }
int gnutls_bye(gnutls_session_t s, gnutls_close_request_t how) { (void)s; (void)how; unreachable(__func__); }
ssize_t gnutls_record_recv(gnutls_session_t s, void *d, size_t n)
{ (void)s; (void)d; (void)n; unreachable(__func__); }
ssize_t gnutls_record_send(gnutls_session_t s, const void *d, size_t n)
{ (void)s; (void)d; (void)n; unreachable(__func__); }
size_t gnutls_record_check_pending(gnutls_session_t s) { (void)s; unreachable(__func__); }
int gnutls_record_get_direction(gnutls_session_t s) { (void)s; unreachable(__func__); }
gnutls_cipher_algorithm_t gnutls_cipher_get(gnutls_session_t s) { (void)s; unreachable(__func__); }
gnutls_protocol_t gnutls_protocol_get_version(gnutls_session_t s) { (void)s; unreachable(__func__); }
