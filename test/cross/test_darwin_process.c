/*
 * test_darwin_process.c - runs macOS's process start time
 * (lib/platform/darwin/process.c) on Linux, against a fake proc_pidinfo
 * (fake_darwin/libproc.h) that plays the kernel: the start of the process,
 * which exec keeps, 100 s before now.
 *
 * What it asserts: ps_process_start_time() is that start, to the
 * microsecond, asked of our own pid with PROC_PIDTBSDINFO, and not this
 * image's start (now: an exec'd image took its predecessor's profile for
 * one left over, output.c); where proc_pidinfo fails, answers short or
 * with a microsecond count out of range, the epoch (not known).
 * Prints "PASS name" / "FAIL name: why" lines; exit status 0 if all passed.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libproc.h>

#include "platform/platform.h"

static struct proc_bsdinfo kernel;
static int answer_short, failing, asked_pid, asked_flavor;

int proc_pidinfo(int pid, int flavor, uint64_t arg, void *buffer, int buffersize)
{
    (void)arg;
    asked_pid = pid;
    asked_flavor = flavor;
    if (failing || buffersize < (int)sizeof kernel)
        return 0;
    memcpy(buffer, &kernel, sizeof kernel);
    return answer_short ? (int)sizeof kernel - 8 : (int)sizeof kernel;
}

/* Not in glibc (fake_darwin/libproc.h declares it). */
int issetugid(void)
{
    return 0;
}

static int failures;

static void check(const char *name, int ok, const char *why)
{
    if (ok) {
        printf("PASS %s\n", name);
    } else {
        printf("FAIL %s: %s\n", name, why);
        failures++;
    }
}

static int is_epoch(void)
{
    struct timespec t = { 1, 1 };
    ps_process_start_time(&t);
    return t.tv_sec == 0 && t.tv_nsec == 0;
}

int main(void)
{
    struct timespec now, t;
    clock_gettime(CLOCK_REALTIME, &now);
    kernel.pbi_start_tvsec = (uint64_t)now.tv_sec - 100;
    kernel.pbi_start_tvusec = 123456;
    ps_process_start_time(&t);
    check("start-time/the-process-not-the-image",
          t.tv_sec == now.tv_sec - 100 && t.tv_nsec == 123456000,
          "not the kernel's start of the process (an exec'd image would replace its predecessor's profile)");
    check("start-time/asks-for-our-pid", asked_pid == (int)getpid() && asked_flavor == PROC_PIDTBSDINFO,
          "proc_pidinfo was not asked PROC_PIDTBSDINFO of our pid");
    failing = 1;
    check("start-time/unknown-is-the-epoch", is_epoch(), "a failed proc_pidinfo did not give the epoch");
    failing = 0;
    answer_short = 1;
    check("start-time/short-answer-is-the-epoch", is_epoch(), "a short answer was used");
    answer_short = 0;
    kernel.pbi_start_tvusec = 1000000;
    check("start-time/bad-microseconds-is-the-epoch", is_epoch(), "1000000 us was used");
    return failures != 0;
}
