/*
 * darwin/dlwatch.c - Python that arrives late, on macOS: the counterpart of
 * lib/platform/linux/dlwatch.c (which explains the why).
 *
 * dyld calls an add-image callback for every image loaded from then on
 * (and, once, for every image already there), so no dlopen stand-in is
 * needed and the caller's @rpath/@loader_path resolution is never
 * touched.  The callback runs inside dyld while it adds the image, so it
 * does as little as it can: a name check (dladdr), and only for an image
 * named like a Python runtime ("Python" framework binary, libpython*)
 * dlsym() on a no-load handle of that very image for _PyRuntime.  A
 * runtime linked under another name is not recognised here.
 *
 * Compile-checked in the cross build only (scripts/cross-macos): no Mac
 * was available to run it (docs/macos.md).
 */
#include <dlfcn.h>
#include <mach-o/dyld.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "platform/dlwatch.h"
#include "util/message.h"

static _Atomic int armed;
static _Atomic int registered;
static _Atomic uintptr_t runtime;
static _Atomic int refused;
static ps_python_loaded_fn report;   /* set once, before armed */
static char runtime_path[512];       /* the libpython reported, for messages */

static void *handle_sym(const char *name, void *ctx)
{
    return dlsym(ctx, name);
}

static int looks_like_python(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libpython", 9) == 0 || strcmp(base, "Python") == 0 ||
           strncmp(base, "Python3", 7) == 0;
}

static void added(const struct mach_header *mh, intptr_t slide)
{
    (void)slide;
    if (!atomic_load(&armed))
        return;
    Dl_info info;
    if (dladdr(mh, &info) == 0 || info.dli_fname == NULL || !looks_like_python(info.dli_fname))
        return;
    void *h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    if (h == NULL)
        return;
    uintptr_t rt = (uintptr_t)dlsym(h, "_PyRuntime");
    if (rt == 0 || rt == atomic_load(&runtime)) {
        dlclose(h);
        return;
    }
    uintptr_t none = 0;
    if (atomic_compare_exchange_strong(&runtime, &none, rt)) {
        snprintf(runtime_path, sizeof runtime_path, "%s", info.dli_fname);
        report(handle_sym, h, info.dli_fname);
        return;   /* the handle stays open: libpython is never unloaded */
    }
    if (!atomic_exchange(&refused, 1))
        ps_say("a second Python runtime was loaded (%s) next to the one being "
               "profiled (%s); it is not profiled", info.dli_fname, runtime_path);
    dlclose(h);
}

void ps_dlwatch_arm(ps_python_loaded_fn loaded)
{
    report = loaded;
    atomic_store(&armed, 1);
    if (!atomic_exchange(&registered, 1))
        _dyld_register_func_for_add_image(added);
}
