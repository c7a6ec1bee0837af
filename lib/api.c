/*
 * api.c - the public API of include/pysample.h.  Each function is a short
 * critical section (lifecycle.h) over the lifecycle, the sampler and the
 * profile; none of them calls into the interpreter.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pysample.h"

#include "config.h"
#include "lifecycle.h"
#include "profile/output.h"
#include "profile/profile.h"
#include "sampler/state.h"

/*
 * The version and build as text in the file itself, so that `pysample info`
 * and `pysample lib` can tell which library a path holds without loading
 * it into their own process (scripts/pysample_tool/library.py reads it).
 */
__attribute__((used)) static const char ps_build_ident[] =
    "libpysample-build: " PS_VERSION_STRING " (" PS_BUILD_STRING ")";

const char *pysample_version(void)
{
    return PS_VERSION_STRING;
}

int pysample_start(int rate_hz)
{
    if (rate_hz < 0 || rate_hz > PS_MAX_RATE)
        return -EINVAL;
    return ps_lifecycle_start_sampling(rate_hz);
}

int pysample_stop(void)
{
    ps_lifecycle_stop_sampling();
    return 0;
}

int pysample_write(const char *path)
{
    if (path == NULL || *path == '\0')
        return -EINVAL;
    if (ps_lifecycle_python() == NULL)
        return -ENOENT;
    struct ps_section sec;
    ps_section_enter(&sec, NULL);
    int rc = ps_profile_write(path, NULL, 0);
    ps_section_leave(&sec);
    return rc;
}

int pysample_reset(void)
{
    int rc = 0;
    if (ps_lifecycle_python() != NULL) {
        struct ps_section sec;
        ps_section_enter(&sec, NULL);
        rc = ps_profile_reset() != 0 ? -ENOMEM : 0;
        ps_section_leave(&sec);
    }
    return rc;
}

/*
 * A caller built against an older, shorter struct passes its size and gets
 * the fields it knows: any size that ends where a field ends.  Anything
 * else (a size that cuts a field, or a struct larger than ours) is not a
 * struct pysample_status of any version.
 */
static int status_size_ok(unsigned size)
{
    static const size_t ends[] = {
        offsetof(struct pysample_status, python_hexversion),
        offsetof(struct pysample_status, free_threaded),
        offsetof(struct pysample_status, rate_hz),
        offsetof(struct pysample_status, ticks),
        offsetof(struct pysample_status, samples),
        offsetof(struct pysample_status, errors),
        offsetof(struct pysample_status, distinct_stacks),
        offsetof(struct pysample_status, errors_unreadable),  /* the first struct */
        offsetof(struct pysample_status, errors_inconsistent),
        sizeof(struct pysample_status),
    };
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        if (size == ends[i])
            return 1;
    return 0;
}

int pysample_status(struct pysample_status *st, unsigned size)
{
    if (st == NULL || !status_size_ok(size))
        return -EINVAL;
    struct pysample_status full;
    memset(&full, 0, sizeof full);
    const struct ps_python *py = ps_lifecycle_python();
    if (py != NULL) {
        struct ps_stats s;
        struct ps_section sec;
        ps_section_enter(&sec, NULL);
        ps_sampler_stats(&s);
        ps_section_leave(&sec);
        full.running = ps_sampler_sampling();
        full.python_hexversion = (int)py->L.hexversion;
        full.free_threaded = py->L.free_threaded;
        full.rate_hz = ps_sampler_rate();
        full.ticks = s.ticks;
        full.samples = s.samples;
        full.errors = s.errors;
        full.distinct_stacks = s.distinct_stacks;
        full.errors_unreadable = s.errors_unreadable;
        full.errors_inconsistent = s.errors_inconsistent;
    }
    memcpy(st, &full, size);
    return 0;
}

int pysample_is_running(void)
{
    return ps_lifecycle_python() != NULL && ps_sampler_sampling();
}

uint64_t pysample_samples(void)
{
    struct pysample_status st;
    pysample_status(&st, sizeof st);
    return st.samples;
}

int pysample_python_version(void)
{
    const struct ps_python *py = ps_lifecycle_python();
    return py != NULL ? (int)py->L.hexversion : 0;
}
