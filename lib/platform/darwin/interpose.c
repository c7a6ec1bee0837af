/*
 * darwin/interpose.c - libc functions we stand in front of on macOS.
 *
 *   sigaction  parity with Linux: a program installing its own SIGSEGV or
 *              SIGBUS handler moves memread.c off the direct-read path for
 *              good (on macOS that path is never taken: see darwin/read.c,
 *              so this only keeps the behaviour identical);
 *   _exit, _Exit
 *              os._exit() ends a process this way, skipping atexit: the
 *              profile is written first.
 *
 * dyld's interposing: with DYLD_INSERT_LIBRARIES=libpysample.dylib, dyld
 * reads the {replacement, original} pairs of the __DATA,__interpose section
 * and redirects every other image's references to the original (the main
 * program, libpython, extension modules) to the replacement.  The
 * replacements then call the originals directly: references from this image
 * are not redirected (darwin/libc.c).  No flat namespace is needed.
 *
 * signal() is not interposed here (on Linux it is, because glibc's signal()
 * bypasses sigaction): whether libSystem's signal() reaches this sigaction
 * depends on how dyld binds calls inside its shared cache, and with the
 * direct path off on macOS it does not matter.
 */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "lifecycle.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/darwin/darwin.h"

static int ps_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (act != NULL && (sig == SIGSEGV || sig == SIGBUS))
        ps_mem_yield_fault_handlers();
    return ps_real_sigaction(sig, act, old);
}

static _Noreturn void ps__exit(int status)
{
    ps_lifecycle_exit(status);
}

static _Noreturn void ps__Exit(int status)
{
    ps_lifecycle_exit(status);
}

struct ps_interpose {
    const void *replacement;
    const void *original;
};

__attribute__((used, section("__DATA,__interpose")))
static const struct ps_interpose ps_interposers[] = {
    { (const void *)ps_sigaction, (const void *)sigaction },
    { (const void *)ps__exit, (const void *)_exit },
    { (const void *)ps__Exit, (const void *)_Exit },
};

/* Not yet on macOS (docs/macos.md): SIGTERM/SIGHUP/SIGINT keep their
 * default action, and with no fopen stand-in CPython 3.12+ counts the
 * sampler thread after os.fork(). */
void ps_fatal_signals_take_over(void (*write_first)(int sig))
{
    (void)write_first;
}
