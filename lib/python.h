/*
 * python.h - the CPython runtime we are sampling: where it is and how it is
 * laid out.  Filled once by ps_python_detect() (runtime.c).
 */
#ifndef PS_PYTHON_H
#define PS_PYTHON_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

struct ps_python {
    uintptr_t runtime;    /* &_PyRuntime */
    uintptr_t code_type;  /* &PyCode_Type, to recognise code objects */
    /* Builtin types the asyncio task walk recognises objects by (tasks.c);
     * 0 where the symbol is missing. */
    uintptr_t dict_type, set_type, list_type, long_type, str_type, weakref_type;
    uintptr_t coro_type, gen_type, agen_type, none;
    uintptr_t func_type, cell_type, tuple_type;   /* a done-callback's closure */
    struct ps_layout L;
};

enum ps_detect {
    PS_DETECT_OK = 0,
    PS_DETECT_NOT_PYTHON,   /* no _PyRuntime: stay inert, say nothing */
    PS_DETECT_UNSUPPORTED,  /* CPython, but not one we can read: why says so */
};

/*
 * Looks for _PyRuntime and works out the layout.  Only dlsym() lookups and
 * reads of static data: safe in a constructor, before the interpreter runs.
 */
enum ps_detect ps_python_detect(struct ps_python *py, char *why, size_t whylen);

/* The same with the symbols of one particular libpython, found by lookup
 * (a libpython loaded late, possibly RTLD_LOCAL: lib/linux/dlwatch.c). */
enum ps_detect ps_python_detect_with(struct ps_python *py, void *(*lookup)(const char *, void *),
                                     void *ctx, char *why, size_t whylen);

/* Only the _PyRuntime lookup: the constructor's whole cost in a process
 * that is not Python. */
int ps_python_present(void);

/* 1 once an interpreter with a thread state exists. */
int ps_python_ready(const struct ps_python *py);

/* 1 once the runtime reports it is finalizing: stop reading. */
int ps_python_finalizing(const struct ps_python *py);

#endif
