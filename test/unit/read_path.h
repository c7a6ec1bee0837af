/*
 * read_path.h - selecting one of memread's read paths by name ("direct",
 * "process_vm_readv", "file", "pipe"), for test_memread.c and
 * test/bench/bench_read.c.
 */
#ifndef PS_TEST_READ_PATH_H
#define PS_TEST_READ_PATH_H

#include <string.h>

#include "memory/memread.h"
#include "platform/platform.h"

/* 0 if the path is in use, -1 if it cannot work on this machine. */
static int use_path(const char *p)
{
    if (strcmp(p, "direct") == 0) {
        ps_plat_read_force(NULL);
        ps_mem_force_mode(PS_READ_DIRECT);
        return ps_mem_mode() == PS_READ_DIRECT ? 0 : -1;
    }
    ps_mem_force_mode(PS_READ_SYSCALL);
    if (ps_plat_read_force(p) != 0)
        return -1;
    return strcmp(ps_mem_mode_name(), p) == 0 ? 0 : -1;
}

#endif
