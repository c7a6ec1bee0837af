/*
 * darwin/interpose.c - libc functions we stand in front of on macOS for
 * the lifecycle (sigaction: interpose_sigaction.c):
 *
 *   _exit, _Exit
 *              os._exit() ends a process this way, skipping atexit: the
 *              profile is written first.
 *
 * dyld's interposing: with DYLD_INSERT_LIBRARIES=libpysample.dylib, dyld
 * reads the {replacement, original} pairs of the __DATA,__interpose section
 * and redirects every other image's references to the original (the main
 * program, libpython, extension modules) to the replacement.  The
 * replacements then call the originals directly: references from this image
 * are not redirected (darwin/libc.c).  No flat namespace is needed.  Each
 * file of stand-ins adds its own pairs to the section (darwin.h).
 */
#include <stdlib.h>
#include <unistd.h>

#include "lifecycle.h"
#include "platform/darwin/darwin.h"

static _Noreturn void ps__exit(int status)
{
    ps_lifecycle_exit(status);
}

static _Noreturn void ps__Exit(int status)
{
    ps_lifecycle_exit(status);
}

PS_DARWIN_INTERPOSE(lifecycle) = {
    { (const void *)ps__exit, (const void *)_exit },
    { (const void *)ps__Exit, (const void *)_Exit },
};
