/* bench_fake_run.c - a stand-in for `mayfly run --json` in test_bench: what it prints and how it ends are chosen by its command words. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* The phases it claims end 7.5 ms after its start: it lives that long,
 * as mayfly run's VM process prints its timings before it ends. */
static void timings(unsigned long long start)
{
	while (now_ns() < start + 8000000ULL)
		usleep(1000);
	printf("{\"event\":\"timings\",\"restored\":true,\"total_ms\":9.0,"
	       "\"start_monotonic_ns\":%llu,\"phases_ms\":{\"jail_started\":0.5,"
	       "\"memory_mapped\":1.0,\"vm_created\":2.0,\"devices_ready\":3.0,"
	       "\"jail_entered\":3.5,\"first_kvm_run\":4.0,\"agent_ready\":5.0,"
	       "\"command_started\":6.0,\"first_output\":6.5,\"command_ended\":7.0,"
	       "\"a_later_phase\":7.5},\"vm_exits\":{\"io\":5,\"mmio\":7,\"other\":1}}\n",
	       start);
}

/* Wait (10 s at most) until DIR holds n entries besides . and ..: the
 * runs of a burst meet there, which they can only if they run at once. */
static int barrier(const char *dir, int n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
	FILE *f = fopen(path, "w");

	if (!f)
		return 1;
	fclose(f);
	for (int tries = 0; tries < 1000; tries++) {
		DIR *d = opendir(dir);
		int count = 0;

		while (d && readdir(d))
			count++;
		if (d)
			closedir(d);
		if (count - 2 >= n)
			return 0;
		usleep(10000);
	}
	return 1;
}

int main(int argc, char **argv)
{
	unsigned long long start = now_ns();
	int i = 1;

	while (i < argc && strcmp(argv[i], "--"))
		i++;
	if (i + 1 >= argc)
		return 2;
	const char *what = argv[i + 1];

	if (!strcmp(what, "ok")) {
		printf("{\"event\":\"stdout\",\"data\":\"hi\\n\"}\n");
		timings(start);
		return 0;
	}
	if (!strcmp(what, "fail")) {
		printf("{\"event\":\"error\",\"message\":\"the VM broke\"}\n");
		return 125;
	}
	if (!strcmp(what, "silent"))
		return 0;
	if (!strcmp(what, "long-line")) {
		/* The command's own output: one line past bench's 64 KiB. */
		fputs("{\"event\":\"stdout\",\"data\":\"", stdout);
		for (int k = 0; k < 100000; k++)
			putchar('x');
		fputs("\"}\n", stdout);
		timings(start);
		return 0;
	}
	if (!strcmp(what, "barrier") && i + 3 < argc) {
		if (barrier(argv[i + 2], atoi(argv[i + 3])))
			return 1;
		timings(start);
		return 0;
	}
	return 2;
}
