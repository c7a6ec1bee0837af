/*
 * pysample.h - public C API of libpysample.
 *
 * libpysample is a sampling profiler for CPython that lives inside the
 * profiled process.  Normally it is switched on from the environment
 * (LD_PRELOAD=libpysample.so PYSAMPLE_OUTPUT=prof.%p.txt python app.py) and
 * needs no code at all.  This API is for programs that want to drive it
 * themselves, from C or from Python through ctypes:
 *
 *     import ctypes
 *     ps = ctypes.CDLL("libpysample.so")
 *     ps.pysample_start(200)                 # 200 Hz
 *     ...
 *     ps.pysample_write(b"/tmp/prof.txt")    # folded stacks so far
 *     ps.pysample_stop()
 *
 * All functions are thread-safe and never call into the Python interpreter,
 * so they may be called with or without the GIL held.  They return 0 on
 * success and a negative errno value on failure.
 */
#ifndef PYSAMPLE_H
#define PYSAMPLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PYSAMPLE_API __attribute__((visibility("default")))
#else
#define PYSAMPLE_API
#endif

/* Version of this library, as MAJOR*10000 + MINOR*100 + PATCH. */
#define PYSAMPLE_VERSION 100

/*
 * The version of the library that is loaded, e.g. "0.1.0": the one number
 * of the library, its header (PYSAMPLE_VERSION), the pysample command and
 * the wheel (docs/install.md).  A static string, never NULL.
 */
PYSAMPLE_API const char *pysample_version(void);

/*
 * Starts sampling at rate_hz samples per second (1..100000; 0 keeps the rate
 * from PYSAMPLE_RATE or the default of 100).  Returns 0 if sampling runs
 * afterwards (also when it already ran), -ENOENT if the process has no
 * CPython runtime, -ENOTSUP if its version or layout is not supported,
 * -EINVAL for a bad rate, or another negative errno if the sampler thread
 * could not be started.
 */
PYSAMPLE_API int pysample_start(int rate_hz);

/*
 * Stops sampling and waits for the sampler thread to finish its current tick.
 * The samples taken so far are kept: they are written at exit if
 * PYSAMPLE_OUTPUT is set, or by pysample_write().  Returns 0, also when
 * sampling was not running.
 */
PYSAMPLE_API int pysample_stop(void);

/*
 * Writes the profile collected so far, in the collapsed format of
 * docs/format.md, to path (placeholders %p %h %t %% are expanded as for
 * PYSAMPLE_OUTPUT).  The file is written atomically: a temporary file in the
 * same directory, renamed over path.  Returns 0 or a negative errno.
 */
PYSAMPLE_API int pysample_write(const char *path);

/* Discards all samples collected so far.  Returns 0, or -ENOMEM (then
 * nothing was discarded). */
PYSAMPLE_API int pysample_reset(void);

/* A snapshot of the profiler's state. */
struct pysample_status {
    int running;              /* 1 while the sampler thread samples */
    int python_hexversion;    /* e.g. 0x030C01F0 for 3.12.1; 0 if none */
    int free_threaded;        /* 1 for a --disable-gil build */
    int rate_hz;              /* requested sampling rate */
    uint64_t ticks;           /* sampler wake-ups */
    uint64_t samples;         /* thread stacks recorded */
    uint64_t errors;          /* stacks dropped because memory changed under us */
    uint64_t distinct_stacks; /* lines the output would have now */
    /* errors by cause (added after the fields above: pysample_status) */
    uint64_t errors_unreadable;   /* memory that could not be read */
    uint64_t errors_inconsistent; /* memory that changed while we read it */
};

/*
 * Fills *st.  size is sizeof(struct pysample_status) as the caller was
 * built with: the structure may grow at the end in later versions, and a
 * caller built against an older, shorter one gets the fields it knows.
 * Returns 0, or -EINVAL if st is NULL or size does not end where a field
 * of this library's structure ends.
 */
PYSAMPLE_API int pysample_status(struct pysample_status *st, unsigned size);

/* Convenience for ctypes: the fields of pysample_status one at a time. */
PYSAMPLE_API int pysample_is_running(void);
PYSAMPLE_API uint64_t pysample_samples(void);
PYSAMPLE_API int pysample_python_version(void);

#ifdef __cplusplus
}
#endif
#endif /* PYSAMPLE_H */
