/*
 * runtime.c - finding _PyRuntime and recognising the interpreter version.
 *
 * Version: Py_Version (3.11+) is exact.  3.9 and 3.10 do not export it, and
 * the only API that tells (Py_GetVersion) is a function we will not call, so
 * the minor version is told from symbols each version added: Py_NewRef
 * first appeared in 3.10, PyFrame_GetCode in 3.9.  Anything older is refused,
 * in one line that names the version where symbols tell it: 3.8 and 3.7
 * have _PyRuntime; 3.6 and 2.7 have none, but any CPython exports
 * Py_Initialize and PyCode_Type, and each version functions of its own.
 * The process has asked to be profiled: it must hear why it is not.
 *
 * 3.13+: _Py_DebugOffsets, the first member of _PyRuntime, describes the
 * layout; its version must equal Py_Version (layout_debugoffsets.c).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "memory/memread.h"
#include "python/runtime.h"
#include "util/tickpath.h"

int ps_python_present(void)
{
    return dlsym(RTLD_DEFAULT, "_PyRuntime") != NULL ||
           (dlsym(RTLD_DEFAULT, "Py_Initialize") != NULL &&
            dlsym(RTLD_DEFAULT, "PyCode_Type") != NULL);
}

/* A CPython older than 3.9, by the functions each version added (or, for
 * Python 2, kept): its name, such as "3.8" or "2.7". */
static const char *old_version(void *(*lookup)(const char *, void *), void *ctx)
{
    if (lookup("PyString_FromString", ctx) != NULL)
        return lookup("PyCapsule_New", ctx) != NULL ? "2.7" : "2.6 or older";
    if (lookup("_PyRuntime", ctx) != NULL)
        return lookup("PyCode_NewWithPosOnlyArgs", ctx) != NULL ? "3.8" : "3.7";
    return lookup("PyOS_FSPath", ctx) != NULL ? "3.6" : "3.5 or older";
}

static void say_too_old(void *(*lookup)(const char *, void *), void *ctx, char *why,
                        size_t whylen)
{
    snprintf(why, whylen, "this Python (%s) is older than 3.9, which libpysample does not support",
             old_version(lookup, ctx));
}

static void *global_sym(const char *name, void *ctx)
{
    (void)ctx;
    return dlsym(RTLD_DEFAULT, name);
}

enum ps_detect ps_python_detect(struct ps_python *py, char *why, size_t whylen)
{
    return ps_python_detect_with(py, global_sym, NULL, why, whylen);
}

/* _PyRuntime, PyCode_Type and the builtin types: PS_DETECT_OK, or what
 * their absence says (no Python at all, or one too old). */
static enum ps_detect find_symbols(struct ps_python *py, void *(*lookup)(const char *, void *),
                                   void *ctx, char *why, size_t whylen)
{
    py->runtime = (uintptr_t)lookup("_PyRuntime", ctx);
    py->code_type = (uintptr_t)lookup("PyCode_Type", ctx);
    if (py->runtime == 0) {
        if (py->code_type == 0 || lookup("Py_Initialize", ctx) == NULL)
            return PS_DETECT_NOT_PYTHON;
        say_too_old(lookup, ctx, why, whylen);
        return PS_DETECT_UNSUPPORTED;
    }
    if (py->code_type == 0) {
        snprintf(why, whylen, "_PyRuntime found but PyCode_Type is missing; not a CPython we know");
        return PS_DETECT_UNSUPPORTED;
    }
#define FIND_BUILTIN(field, symbol) py->field = (uintptr_t)lookup((symbol), ctx);
    PS_PYTHON_BUILTINS(FIND_BUILTIN)
#undef FIND_BUILTIN
    return PS_DETECT_OK;
}

/* The version as a PY_VERSION_HEX into *hex (3.9 and 3.10: the minor
 * version only, from the symbols they added); 0, or -1 with why said. */
static int version_hex(void *(*lookup)(const char *, void *), void *ctx, uint32_t *hex,
                       char *why, size_t whylen)
{
    /* Read, not dereferenced: the symbols may be another process's
     * (pysample-attach, lib/platform/target.h). */
    const void *pv = lookup("Py_Version", ctx);
    unsigned long v;
    if (pv != NULL) {
        if (ps_read(&v, (uintptr_t)pv, sizeof v) != 0) {
            snprintf(why, whylen, "cannot read Py_Version");
            return -1;
        }
        *hex = (uint32_t)v;
    } else if (lookup("Py_NewRef", ctx) != NULL) {
        *hex = 0x030A0000;
    } else if (lookup("PyFrame_GetCode", ctx) != NULL) {
        *hex = 0x03090000;
    } else {
        say_too_old(lookup, ctx, why, whylen);
        return -1;
    }
    if ((*hex >> 24) != 3) {
        snprintf(why, whylen, "unrecognised Python version %x", *hex);
        return -1;
    }
    return 0;
}

/* 3.9-3.12: the tables of layout_legacy.c, for the builds they hold for.
 * 0, or -1 with why said. */
static int legacy_layout(struct ps_python *py, void *(*lookup)(const char *, void *),
                         void *ctx, uint32_t hex, char *why, size_t whylen)
{
    int minor = (hex >> 16) & 0xff;
    /* --with-trace-refs adds two pointers to every object header before
     * 3.13, moving every object field; its exported helpers give it away. */
    if (lookup("_Py_PrintReferenceAddresses", ctx) != NULL ||
        lookup("_Py_ForgetReference", ctx) != NULL) {
        snprintf(why, whylen, "Python 3.%d built --with-trace-refs is not supported "
                 "(its object layout differs)", minor);
        return -1;
    }
    /* 3.9 and 3.10 may say only their minor version, which their tables
     * need no more than. */
    int minor_only = minor <= 10 && (hex & 0xffff) == 0;
    if (!minor_only && (hex & 0xf0) != 0xf0) {
        snprintf(why, whylen, "Python pre-release %x is not supported (use a final release)", hex);
        return -1;
    }
    return ps_layout_legacy(minor, hex, &py->L, why, whylen) == PS_LAYOUT_OK ? 0 : -1;
}

/* 3.13+: the layout _Py_DebugOffsets describes.  0, or -1 with why said. */
static int debug_offsets_layout(struct ps_python *py, uint32_t hex, char *why, size_t whylen)
{
    uint8_t dbg[1024];
    /* Static data of the executable or libpython: always mapped, but
     * read it through the checked path like everything else. */
    if (ps_read(dbg, py->runtime, sizeof dbg) != 0) {
        snprintf(why, whylen, "cannot read _PyRuntime");
        return -1;
    }
    return ps_layout_from_debug_offsets(dbg, sizeof dbg, hex, &py->L, why, whylen) ==
                   PS_LAYOUT_OK ? 0 : -1;
}

enum ps_detect ps_python_detect_with(struct ps_python *py, void *(*lookup)(const char *, void *),
                                     void *ctx, char *why, size_t whylen)
{
    uint32_t hex = 0;
    memset(py, 0, sizeof *py);
    enum ps_detect found = find_symbols(py, lookup, ctx, why, whylen);
    if (found != PS_DETECT_OK)
        return found;
    if (version_hex(lookup, ctx, &hex, why, whylen) != 0)
        return PS_DETECT_UNSUPPORTED;
    int laid_out = ((hex >> 16) & 0xff) <= 12 ? legacy_layout(py, lookup, ctx, hex, why, whylen)
                                              : debug_offsets_layout(py, hex, why, whylen);
    return laid_out == 0 ? PS_DETECT_OK : PS_DETECT_UNSUPPORTED;
}

int ps_python_ready(const struct ps_python *py)
{
    uintptr_t interp, ts;
    if (ps_read_ptr(py->runtime + py->L.rt_interp_head, &interp) != 0 || interp == 0)
        return 0;
    if (ps_read_ptr(interp + py->L.is_threads_head, &ts) != 0 || ts == 0)
        return 0;
    return 1;
}

PS_TICK_PATH int ps_python_finalizing(const struct ps_python *py)
{
    uintptr_t f;
    /* _PyRuntime is static data and never goes away, so a failed read says
     * nothing about the interpreter: it was our read path (a second reader
     * contending for the guard, a refused system call).  Treating it as
     * "finalizing" would end sampling for good on one transient failure. */
    if (ps_read_ptr(py->runtime + py->L.rt_finalizing, &f) != 0)
        return 0;
    return f != 0;
}

PS_TICK_PATH int ps_python_heads(const struct ps_python *py, uintptr_t *head)
{
    const struct ps_layout *L = &py->L;
    uint32_t fin = L->rt_finalizing, first = L->rt_interp_head;
    uint32_t lo = fin < first ? fin : first, hi = (fin < first ? first : fin) + 8;
    uintptr_t f;
    *head = 0;
    if (hi - lo > PS_RT_HEADS_SPAN) {
        if (ps_read_ptr(py->runtime + first, head) != 0)
            *head = 0;
        return ps_python_finalizing(py);
    }
    /* A failed read is our read path's, as in ps_python_finalizing: not
     * finalizing, and no interpreter listed this tick. */
    uint8_t buf[PS_RT_HEADS_SPAN];
    if (ps_read(buf, py->runtime + lo, hi - lo) != 0)
        return 0;
    memcpy(head, buf + (first - lo), sizeof *head);
    memcpy(&f, buf + (fin - lo), sizeof f);
    return f != 0;
}
