/*
 * native_ext.c - a CPython extension module for the native-stack tests,
 * compiled by test_native.py against each interpreter's own headers:
 *
 *   nativeext.spin(seconds)   ext_outer -> ext_middle -> ext_leaf, spinning
 *   nativeext.call_back(f)    calls f() from C (Python -> C -> Python)
 *
 * The chain's functions are noinline and noclone, and do work after each
 * call, so that they keep their names and frames at -O2.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>

#define KEEP __attribute__((noinline, noclone))

volatile unsigned long long nativeext_sink;

unsigned long long ext_leaf(double seconds);
unsigned long long ext_middle(double seconds);
unsigned long long ext_outer(double seconds);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

KEEP unsigned long long ext_leaf(double seconds)
{
    double end = now_s() + seconds;
    unsigned long long x = 0;
    while (now_s() < end)
        for (int i = 0; i < 20000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    nativeext_sink += x;
    return x;
}

KEEP unsigned long long ext_middle(double seconds)
{
    unsigned long long r = ext_leaf(seconds);
    nativeext_sink += r;
    return r + 1;
}

KEEP unsigned long long ext_outer(double seconds)
{
    unsigned long long r = ext_middle(seconds);
    nativeext_sink += r;
    return r + 1;
}

static PyObject *spin(PyObject *self, PyObject *arg)
{
    (void)self;
    double s = PyFloat_AsDouble(arg);
    if (s == -1.0 && PyErr_Occurred())
        return NULL;
    ext_outer(s);
    Py_RETURN_NONE;
}

static PyObject *call_back(PyObject *self, PyObject *f)
{
    (void)self;
    PyObject *r = PyObject_CallObject(f, NULL);
    nativeext_sink++;
    return r;
}

static PyMethodDef methods[] = {
    { "spin", spin, METH_O, "spin in ext_outer -> ext_middle -> ext_leaf" },
    { "call_back", call_back, METH_O, "call f() from C" },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = { PyModuleDef_HEAD_INIT, "nativeext", NULL, -1, methods,
                                     NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit_nativeext(void)
{
    PyObject *m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
    if (m != NULL)
        PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
    return m;
}
