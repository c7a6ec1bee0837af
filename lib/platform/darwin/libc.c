/*
 * darwin/libc.c - the C library's own sigaction, pthread_sigmask and _exit,
 * and the small struct stat difference.
 *
 * On macOS the interposers (darwin/interpose.c, interpose_sigaction.c) are
 * listed in a __DATA,__interpose section, which dyld applies to every image
 * except the one that holds the section.  So from this library a plain call
 * to sigaction(), pthread_sigmask() or _exit() reaches libSystem's, and no
 * lookup is needed.
 */
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"

void ps_interpose_init(void)
{
}

int ps_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return sigaction(sig, act, old);
}

int ps_real_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return pthread_sigmask(how, set, old);
}

_Noreturn void ps_real_exit(int status)
{
    _exit(status);
}

struct timespec ps_stat_mtime(const struct stat *st)
{
    return st->st_mtimespec;
}

/* The program's view of SIGSEGV/SIGBUS is never used on macOS (the direct
 * read path is off there: darwin/read.c); the action reads back as set. */
void ps_sigaction_learn(const struct sigaction *installed, int asked_flags)
{
    (void)installed;
    (void)asked_flags;
}

void ps_sigaction_as_kernel(const struct sigaction *act, struct sigaction *out)
{
    *out = *act;
}

int ps_sigaction_carried_flags(void)
{
    return SA_ONSTACK | SA_RESTART;
}
