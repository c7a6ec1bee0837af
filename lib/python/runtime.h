/*
 * runtime.h - the CPython runtime we are sampling: where it is and how it is
 * laid out.  Filled once by ps_python_detect() (runtime.c).
 */
#ifndef PS_RUNTIME_H
#define PS_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

/*
 * Builtin types (and None) that objects are recognised by: asyncio's task
 * walk (tasks_*.c), thread names (threadnames.c), pyobj.c.  Each is a
 * field of struct ps_python and the symbol it is found by (runtime.c);
 * 0 where the symbol is missing.  func, cell and tuple: a done-callback's
 * closure.
 */
#define PS_PYTHON_BUILTINS(X) \
    X(dict_type, "PyDict_Type") X(set_type, "PySet_Type") X(list_type, "PyList_Type") \
    X(long_type, "PyLong_Type") X(str_type, "PyUnicode_Type") \
    X(weakref_type, "_PyWeakref_RefType") X(coro_type, "PyCoro_Type") \
    X(gen_type, "PyGen_Type") X(agen_type, "PyAsyncGen_Type") X(none, "_Py_NoneStruct") \
    X(func_type, "PyFunction_Type") X(cell_type, "PyCell_Type") X(tuple_type, "PyTuple_Type")

struct ps_python {
    uintptr_t runtime;    /* &_PyRuntime */
    uintptr_t code_type;  /* &PyCode_Type, to recognise code objects */
#define PS_BUILTIN_FIELD(field, symbol) uintptr_t field;
    PS_PYTHON_BUILTINS(PS_BUILTIN_FIELD)
#undef PS_BUILTIN_FIELD
    struct ps_layout L;
};

enum ps_detect {
    PS_DETECT_OK = 0,
    PS_DETECT_NOT_PYTHON,   /* no CPython at all: stay inert, say nothing */
    PS_DETECT_UNSUPPORTED,  /* CPython, but not one we can read: why says so */
};

/*
 * Looks for _PyRuntime and works out the layout.  Only dlsym() lookups and
 * reads of static data: safe in a constructor, before the interpreter runs.
 */
enum ps_detect ps_python_detect(struct ps_python *py, char *why, size_t whylen);

/* The same with the symbols of one particular libpython, found by lookup
 * (a libpython loaded late, possibly RTLD_LOCAL: lib/platform/linux/dlwatch.c). */
enum ps_detect ps_python_detect_with(struct ps_python *py, void *(*lookup)(const char *, void *),
                                     void *ctx, char *why, size_t whylen);

/* Only the lookups of _PyRuntime (or, for a CPython older than 3.7, of
 * Py_Initialize and PyCode_Type): the constructor's whole cost in a process
 * that is not Python. */
int ps_python_present(void);

/* 1 once an interpreter with a thread state exists. */
int ps_python_ready(const struct ps_python *py);

/* 1 once the runtime reports it is finalizing: stop reading. */
int ps_python_finalizing(const struct ps_python *py);

/*
 * A tick's first look at _PyRuntime: ps_python_finalizing's answer, and
 * the first interpreter into *head (0 if it cannot be read).  One read
 * where the two fields lie within PS_RT_HEADS_SPAN bytes of each other
 * (16-24 bytes apart in every layout known, on one line), else two.
 */
#define PS_RT_HEADS_SPAN 64
int ps_python_heads(const struct ps_python *py, uintptr_t *head);

#endif
