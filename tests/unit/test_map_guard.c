/* test_map_guard.c - a restored VM's memory or overlay file cut short under it: exit 7 and one line, from any thread that touches it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/event.h"
#include "lib/exitcode.h"
#include "lib/map_guard.h"

#define PAGES 4
#define PAGE 4096

static const char line[] = "guest RAM is gone: the memory file was cut short\n";
static const char other_line[] = "the disk's blocks are gone: the overlay was cut short\n";

/* Guest RAM as mem_restore maps it: a file of PAGES pages, MAP_PRIVATE,
 * page 0 written (a private copy). The file is unlinked at once. */
static volatile uint8_t *map_ram(int *fd)
{
	char path[] = "/tmp/mayfly-map-guard.XXXXXX";
	volatile uint8_t *ram;

	*fd = mkstemp(path);
	cr_assert_geq(*fd, 0);
	unlink(path);
	cr_assert_eq(ftruncate(*fd, PAGES * PAGE), 0);
	ram = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, *fd, 0);
	cr_assert_neq((void *)ram, MAP_FAILED);
	ram[0] = 1;
	return ram;
}

/* Run fn in a child whose stderr is captured; its wait status, and what
 * it wrote in err (NUL-terminated). */
static int in_child(void (*fn)(void), char *err, size_t len)
{
	int p[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		fn();
		_exit(99);   /* fn returned: no fault at all */
	}
	close(p[1]);
	while (got < len - 1 && (n = read(p[0], err + got, len - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(p[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return status;
}

/* fn's child ended as a cut memory file must end it: exit 7, the line. */
static void want_exit_7(void (*fn)(void), const char *want)
{
	char err[512];
	int status = in_child(fn, err, sizeof(err));

	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_KVM_ERROR,
		  "status 0x%x (killed by SIGBUS: 0x7), stderr: %s", status, err);
	cr_assert_str_eq(err, want, "stderr: %s", err);
}

static void touch_after_cut(void)
{
	int fd;
	volatile uint8_t *ram = map_ram(&fd);

	if (map_guard_add((const void *)ram, PAGES * PAGE, line))
		_exit(98);
	if (ftruncate(fd, 0))
		_exit(97);
	(void)ram[2 * PAGE];
}

Test(map_guard, a_touch_past_the_cut_ends_with_exit_7_and_the_line)
{
	want_exit_7(touch_after_cut, line);
}

static void touch_private_copy_after_cut(void)
{
	int fd;
	volatile uint8_t *ram = map_ram(&fd);

	if (map_guard_add((const void *)ram, PAGES * PAGE, line) || ftruncate(fd, 0))
		_exit(98);
	(void)ram[0];   /* written before the cut: the kernel takes it too */
}

Test(map_guard, the_vms_own_copies_go_with_the_file)
{
	want_exit_7(touch_private_copy_after_cut, line);
}

static void touch_outside_the_guard(void)
{
	int fd;
	volatile uint8_t *ram = map_ram(&fd);

	/* Only the first two pages are "guest RAM". */
	if (map_guard_add((const void *)ram, 2 * PAGE, line) || ftruncate(fd, 0))
		_exit(98);
	(void)ram[3 * PAGE];
}

Test(map_guard, a_sigbus_elsewhere_keeps_its_default_action)
{
	char err[512];
	int status = in_child(touch_outside_the_guard, err, sizeof(err));

	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
		  "status 0x%x, stderr: %s", status, err);
	cr_assert_null(strstr(err, line), "stderr: %s", err);
}

static void touch_the_second_of_two(void)
{
	int fd_ram, fd_disk;
	volatile uint8_t *ram = map_ram(&fd_ram), *disk = map_ram(&fd_disk);

	if (map_guard_add((const void *)ram, PAGES * PAGE, line) ||
	    map_guard_add((const void *)disk, PAGES * PAGE, other_line) || ftruncate(fd_disk, 0))
		_exit(98);
	(void)ram[PAGE];    /* its file is whole: no fault */
	(void)disk[PAGE];
}

Test(map_guard, each_mapping_names_its_own_file)
{
	want_exit_7(touch_the_second_of_two, other_line);
}

static void add_one_too_many(void)
{
	static const uint8_t spare[MAP_GUARD_MAX + 1];

	for (int i = 0; i < MAP_GUARD_MAX; i++)
		if (map_guard_add(&spare[i], 1, line))
			_exit(98);
	_exit(map_guard_add(&spare[MAP_GUARD_MAX], 1, line) == -ENOSPC ? 0 : 97);
}

Test(map_guard, a_full_table_is_refused)
{
	char err[64];
	int status = in_child(add_one_too_many, err, sizeof(err));

	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
}

/* The I/O thread is where device code touches guest RAM. */
static volatile uint8_t *io_ram;

static void io_touch(void *opaque, uint32_t events)
{
	(void)opaque;
	(void)events;
	(void)io_ram[2 * PAGE];
}

static void touch_from_the_io_thread(void)
{
	static struct event_loop loop;
	uint64_t one = 1;
	int fd, efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	io_ram = map_ram(&fd);
	if (efd < 0 || map_guard_add((const void *)io_ram, PAGES * PAGE, line) ||
	    ftruncate(fd, 0) || event_loop_init(&loop) ||
	    event_loop_add(&loop, efd, EPOLLIN, io_touch, NULL) || event_loop_start(&loop, NULL))
		_exit(98);
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		_exit(97);
	sleep(10);   /* the I/O thread ends the process long before */
	_exit(96);
}

/* Before, it blocked every signal: the kernel killed the process with
 * SIGBUS and the handler never ran. */
Test(map_guard, the_io_thread_keeps_the_fault_deliverable)
{
	want_exit_7(touch_from_the_io_thread, line);
}
