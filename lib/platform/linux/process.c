/*
 * linux/process.c - what /proc tells about this process and its parent:
 * when this process started (for output.c's "left over" rule) and whether
 * its parent is a Python process profiling to the same PYSAMPLE_OUTPUT
 * (for output.c's "first process of the run" rule).  platform.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"

int ps_secure_execution(void)
{
    return getauxval(AT_SECURE) != 0 || getuid() != geteuid() || getgid() != getegid();
}

/* Field 22 of a /proc stat file, the start in clock ticks since boot on
 * the boot-time clock; 0 if it cannot be read. */
static unsigned long long stat_start_ticks(const char *path)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* Field 2 is the command name in parentheses and may hold spaces:
     * count from the last ')'. */
    char *p = strrchr(buf, ')');
    for (int field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL)
        return 0;
    char *end;
    unsigned long long ticks = strtoull(p + 1, &end, 10);
    return end == p + 1 ? 0 : ticks;
}

/*
 * The process's start in ticks since boot: the earlier of what
 * /proc/self/stat says and what the thread group leader's own entry
 * /proc/self/task/<pid>/stat says.  The kernel gives both the same value,
 * kept across exec.  qemu-user answers /proc/self/stat (and /proc/<pid>/
 * stat) itself, with the time its own instance started, and a new one
 * starts at every exec: the exec'd image would see a start after its
 * predecessor wrote its profile and replace that file as left over.  The
 * task entry it passes through.  The earlier reading is the safe one.
 */
static unsigned long long start_ticks(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", (long)getpid());
    unsigned long long a = stat_start_ticks("/proc/self/stat"), b = stat_start_ticks(path);
    return a == 0 ? b : b == 0 || a < b ? a : b;
}

void ps_process_start_time(struct timespec *out)
{
    /* Not known: the epoch, before every file, so that none is taken for
     * one left over (output.c).  "Now" would let an exec'd image replace
     * the profile its predecessor wrote. */
    out->tv_sec = 0;
    out->tv_nsec = 0;
    unsigned long long ticks = start_ticks();
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec boot, real;
    if (ticks == 0 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0 ||
        clock_gettime(CLOCK_REALTIME, &real) != 0)
        return;
    int64_t started_boot = (int64_t)(ticks / (unsigned long long)hz) * 1000000000 +
                           (int64_t)(ticks % (unsigned long long)hz) * (1000000000 / hz);
    int64_t ago = (int64_t)boot.tv_sec * 1000000000 + boot.tv_nsec - started_boot;
    /* The start is rounded down to a tick already; 10 ms more cover the
     * two clock readings and keep the estimate on the early side. */
    int64_t at = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec - ago - 10000000;
    if (ago < 0 || at < 0)
        return;
    out->tv_sec = (time_t)(at / 1000000000);
    out->tv_nsec = (long)(at % 1000000000);
}

/* Reads a whole /proc file (at most cap bytes) into a malloc'ed buffer. */
static char *read_proc(const char *path, size_t cap, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t size = 65536, n = 0;
    char *buf = malloc(size + 1);
    while (buf != NULL) {
        if (n == size) {
            if (size >= cap)
                break;
            char *bigger = realloc(buf, size * 2 + 1);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            size *= 2;
        }
        ssize_t r = read(fd, buf + n, size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

/* Whether /proc/<pid>/environ holds exactly the entry name=value. */
static int environ_has(pid_t pid, const char *name, const char *value)
{
    char path[64];
    size_t len, nl = strlen(name);
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
    char *env = read_proc(path, 4 << 20, &len);
    if (env == NULL)
        return 0;
    int found = 0;
    for (size_t i = 0; i < len && !found; i += strlen(env + i) + 1)
        found = strncmp(env + i, name, nl) == 0 && env[i + nl] == '=' &&
                strcmp(env + i + nl + 1, value) == 0;
    free(env);
    return found;
}

/* Whether pid has our library mapped, and a Python (its executable or
 * libpython) too: a shell with LD_PRELOAD and PYSAMPLE_OUTPUT exported
 * has the first but is no profiled parent. */
static int maps_us_and_python(pid_t pid)
{
    Dl_info info;
    struct stat self;
    if (dladdr((void *)maps_us_and_python, &info) == 0 || info.dli_fname == NULL ||
        stat(info.dli_fname, &self) != 0)
        return 0;
    char path[64];
    size_t len;
    snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
    char *maps = read_proc(path, 64 << 20, &len);
    if (maps == NULL)
        return 0;
    int us = 0, python = 0;
    for (char *line = maps; *line && !(us && python);) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        unsigned maj, min;
        unsigned long long ino;
        int at = 0;
        /* address perms offset dev inode path */
        if (sscanf(line, "%*s %*s %*s %x:%x %llu %n", &maj, &min, &ino, &at) == 3 && at > 0) {
            const char *file = line + at;
            const char *base = strrchr(file, '/');
            base = base ? base + 1 : file;
            if (ino == (unsigned long long)self.st_ino && maj == major(self.st_dev) &&
                min == minor(self.st_dev))
                us = 1;
            else if (*file == '/' &&
                     (strncmp(base, "python", 6) == 0 || strncmp(base, "libpython", 9) == 0))
                python = 1;
        }
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    free(maps);
    return us && python;
}

int ps_parent_profiles_to(const char *tmpl)
{
    pid_t pp = getppid();
    if (pp <= 1)
        return 0;
    return environ_has(pp, "PYSAMPLE_OUTPUT", tmpl) && maps_us_and_python(pp);
}
