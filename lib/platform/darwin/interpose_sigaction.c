/*
 * darwin/interpose_sigaction.c - the stand-in for sigaction on macOS
 * (interpose.c says how dyld interposes).
 *
 *   sigaction  parity with Linux: a program installing its own SIGSEGV or
 *              SIGBUS handler moves memread.c off the direct-read path for
 *              good (on macOS that path is never taken: see darwin/read.c,
 *              so this only keeps the behaviour identical).
 *
 * signal() is not interposed here (on Linux it is, because glibc's signal()
 * bypasses sigaction): whether libSystem's signal() reaches this sigaction
 * depends on how dyld binds calls inside its shared cache, and with the
 * direct path off on macOS it does not matter.
 */
#include <signal.h>

#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/darwin/darwin.h"

static int ps_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (act != NULL && (sig == SIGSEGV || sig == SIGBUS))
        ps_mem_yield_fault_handlers();
    return ps_real_sigaction(sig, act, old);
}

PS_DARWIN_INTERPOSE(sigaction) = {
    { (const void *)ps_sigaction, (const void *)sigaction },
};
