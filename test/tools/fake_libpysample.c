/*
 * fake_libpysample.c - a stand-in for libpysample.so in the tests of
 * `pysample record`.
 *
 * It checks the record command's side of the contract without depending on
 * the real sampler: when preloaded into a process that has a CPython runtime
 * (Py_IsInitialized is found) and PYSAMPLE_OUTPUT is set, it writes at exit a
 * fixed collapsed profile to the expanded PYSAMPLE_OUTPUT path.  The profile
 * reports what the library was given, so that the tests can see it:
 *
 *   thread <pid> (MainThread);fake.main (fake.py:1);env rate=<PYSAMPLE_RATE>
 *       mode=<PYSAMPLE_MODE> format=<PYSAMPLE_FORMAT> async=<PYSAMPLE_ASYNC>
 *       native=<PYSAMPLE_NATIVE> gil=<PYSAMPLE_GIL> lines=<PYSAMPLE_LINES> (fake.py:2) <N>
 *   thread <pid> (MainThread);fake.main (fake.py:1);fake.idle (fake.py:3) 1
 *
 * Placeholders as in the real library: %p pid, %h host name, %t start time,
 * %% a percent sign.  N is PYSAMPLE_FAKE_SAMPLES, 3 when unset, so that a
 * test can make one process busier than another.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static time_t start_time;

__attribute__((constructor)) static void fake_start(void)
{
    start_time = time(NULL);
}

static void append(char *out, size_t size, size_t *len, const char *text)
{
    size_t n = strlen(text);
    if (*len + n >= size)
        n = size - *len - 1;
    memcpy(out + *len, text, n);
    *len += n;
    out[*len] = '\0';
}

static void expand(const char *tmpl, char *out, size_t size)
{
    size_t len = 0;
    char buf[256];
    out[0] = '\0';
    for (const char *p = tmpl; *p; p++) {
        if (*p == '%' && p[1]) {
            p++;
            if (*p == 'p') {
                snprintf(buf, sizeof buf, "%ld", (long)getpid());
            } else if (*p == 'h') {
                if (gethostname(buf, sizeof buf) != 0)
                    strcpy(buf, "unknown");
                buf[sizeof buf - 1] = '\0';
            } else if (*p == 't') {
                snprintf(buf, sizeof buf, "%ld", (long)start_time);
            } else if (*p == '%') {
                strcpy(buf, "%");
            } else {
                snprintf(buf, sizeof buf, "%%%c", *p);
            }
        } else {
            buf[0] = *p;
            buf[1] = '\0';
        }
        append(out, size, &len, buf);
    }
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return value && *value ? value : fallback;
}

__attribute__((destructor)) static void fake_write(void)
{
    const char *tmpl = getenv("PYSAMPLE_OUTPUT");
    if (!tmpl || !*tmpl || !dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
        return;
    char path[4096];
    expand(tmpl, path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    long pid = (long)getpid();
    fprintf(f, "thread %ld (MainThread);fake.main (fake.py:1);env rate=%s mode=%s format=%s async=%s native=%s gil=%s lines=%s (fake.py:2) %s\n",
            pid, env_or("PYSAMPLE_RATE", "unset"), env_or("PYSAMPLE_MODE", "unset"),
            env_or("PYSAMPLE_FORMAT", "unset"), env_or("PYSAMPLE_ASYNC", "unset"), env_or("PYSAMPLE_NATIVE", "unset"),
            env_or("PYSAMPLE_GIL", "unset"), env_or("PYSAMPLE_LINES", "unset"),
            env_or("PYSAMPLE_FAKE_SAMPLES", "3"));
    fprintf(f, "thread %ld (MainThread);fake.main (fake.py:1);fake.idle (fake.py:3) 1\n", pid);
    fclose(f);
}
