/* seccomp_exit_helper.c - for test_seccomp: take a role's filter, then end through exit(), so that a sanitizer build's leak check (and on request a leak report) runs under that filter. */
#include <stdlib.h>

#include "seccomp/seccomp.h"

void *volatile seccomp_helper_kept;

int main(int argc, char **argv)
{
	/* mayfly allocates long before its filters; so do we here. glibc's
	 * first malloc seeds its tcache key with getrandom, which no role
	 * allows (a sanitizer build's allocator never calls it). */
	seccomp_helper_kept = malloc(1);   /* volatile: the pair is not optimised away */
	free(seccomp_helper_kept);
	if (argc < 2 || seccomp_install((enum seccomp_role)atoi(argv[1])))
		return 100;
	if (argc > 2) {
		seccomp_helper_kept = malloc(64);
		seccomp_helper_kept = NULL;   /* a leak for LeakSanitizer to report */
	}
	return 0;
}
