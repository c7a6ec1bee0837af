/*
 * linux/dlwatch_other.c - dlwatch.c's dlopen where there is no stub for
 * the CPU (dlwatch_stub.h): plain C.
 */
#include "platform/linux/dlwatch_stub.h"

/* No stub for this architecture: the call goes through unwatched and the
 * caller is lost only when the watch is on (dlwatch.c, at its top). */
PS_EXPORT void *dlopen(const char *file, int mode)
{
    ps_dl_resolve();
    return ps_dl_real_dlopen(file, mode);
}
