/*
 * linux/interpose.c - libc functions we stand in front of.
 *
 *   sigaction, signal
 *              so the program installing its own SIGSEGV/SIGBUS handler
 *              first moves us off the direct-read path (memread.c); glibc's
 *              signal() calls its internal sigaction, not ours, so it needs
 *              its own stand-in;
 *   _exit, _Exit
 *              os._exit() and multiprocessing children end this way,
 *              skipping atexit: the profile is written first.
 *
 * Each forwards to libc's definition (linux/libc.c).
 */
#include <signal.h>
#include <unistd.h>

#include "../lifecycle.h"
#include "../memread.h"
#include "../platform.h"

#define PS_EXPORT __attribute__((visibility("default")))

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (act != NULL && (sig == SIGSEGV || sig == SIGBUS))
        ps_mem_yield_fault_handlers();
    return ps_real_sigaction(sig, act, old);
}

PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    if (sig == SIGSEGV || sig == SIGBUS)
        ps_mem_yield_fault_handlers();
    return ps_real_signal(sig, handler);
}

PS_EXPORT _Noreturn void _exit(int status)
{
    ps_lifecycle_process_exit();
    ps_real_exit(status);
}

PS_EXPORT _Noreturn void _Exit(int status)
{
    ps_lifecycle_process_exit();
    ps_real_exit(status);
}
