/*
 * output.c - where the output is written: which name each process gets,
 * and how a file is replaced without a reader ever seeing half of it.
 *
 * Atomicity.  The profile is written to a temporary file created next to
 * the target (same directory, so same file system) with O_EXCL|O_NOFOLLOW
 * and mode 0600 (PYSAMPLE_FILE_MODE), then moved into place in one step: a
 * reader opening the name at any moment sees the previous complete profile
 * or the new one, never a partial file.  A name that is free is taken with
 * link(), which fails if someone created the name meanwhile, so two
 * processes racing for one name never overwrite each other; a name this
 * process already holds is replaced with rename().  Neither follows a
 * symbolic link.
 *
 * Which name (docs/processes.md says the same for users).  Each process
 * tries a short list of candidate names in order and takes the first that
 * is free, already its own, or left over from before it started:
 *   - with %p:    prof.<pid>.txt, then prof.<pid>.1.txt, prof.<pid>.2.txt...
 *     (the later ones only come into play after exec: the new image has the
 *     same pid and must not overwrite what the old image wrote);
 *   - without %p: prof.txt for the first process, prof.<pid>.txt for every
 *     other one, then prof.<pid>.1.txt...  "Other" means a forked child
 *     (it knows), or a process started by a Python process that profiles
 *     to the same PYSAMPLE_OUTPUT (found in /proc/<ppid>: that environment
 *     variable, our library and a Python mapped).  A process that cannot
 *     tell (its parent already gone) still never takes a name another
 *     process of this run holds, by the next rule.
 * A file at a candidate name is "left over" when it is a regular file of
 * ours (same owner) last written before this process started: a profile of
 * an earlier run, or of an earlier process that had our pid, which we
 * replace as the user expects.  A file written after this process started
 * belongs to another process of this run (or to this process before an
 * exec) and is never replaced.  Anything else at a candidate (a symbolic
 * link, a directory, another user's file) is left alone and reported once.
 * "Started" is the process's start time from /proc/self/stat, which an
 * exec keeps, with 10 ms to spare for the clock tick it is rounded to.
 *
 * A name, once taken, stays this process's for its later writes as long as
 * the file there is the one it wrote (device and inode).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <dlfcn.h>
#include <sys/sysmacros.h>
#endif

#include "config.h"
#include "output.h"
#include "platform.h"

#define PS_MAX_CANDIDATES 100

static struct {
    char tmpl[4096];
    int mode;
    int has_pid;
    long start_time;            /* %t: seconds, when this image started */
    struct timespec proc_start; /* when this process started (see above) */
    int lineage;                /* -1 not known yet, 0 first process, 1 not */
    int claimed;                /* cand is ours while dev/ino are there */
    unsigned cand;
    dev_t dev;
    ino_t ino;
    unsigned counter;           /* temporary file names */
    ps_output_note_fn note;
    char noted[4096];           /* the last name we said something about */
} O = { .mode = 0600, .lineage = -1 };

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
}

static int expand(const char *tmpl, char *out, size_t outlen)
{
    char host[256];
    host_name(host, sizeof host);
    return ps_expand_path(tmpl, (long)getpid(), host, O.start_time, out, outlen);
}

static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Creates a fresh temporary file next to path. */
static int open_temp(const char *path, int mode, char *tmp, size_t tmplen)
{
    char dir[4096];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    dir_of(path, dir, sizeof dir);
    for (int attempt = 0; attempt < 100; attempt++) {
        int n = snprintf(tmp, tmplen, "%s/.%s.%ld.%u.tmp", dir, base, (long)getpid(),
                         __atomic_fetch_add(&O.counter, 1, __ATOMIC_RELAXED));
        if (n < 0 || (size_t)n >= tmplen)
            return -ENAMETOOLONG;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Writes data to a new temporary file next to path; its identity in *st. */
static int write_temp(const char *path, const char *data, size_t len, int mode,
                      char *tmp, size_t tmplen, struct stat *st)
{
    int fd = open_temp(path, mode, tmp, tmplen);
    if (fd < 0)
        return fd;
    /* The umask may have narrowed the mode; the user asked for this one. */
    fchmod(fd, (mode_t)mode);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            return -e;
        }
        off += (size_t)w;
    }
    if (st != NULL && fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return -e;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

int ps_write_atomic(const char *path, const char *data, size_t len, int mode)
{
    char tmp[4200];
    int rc = write_temp(path, data, len, mode, tmp, sizeof tmp, NULL);
    if (rc != 0)
        return rc;
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

/* Puts tmp at path only if nothing is there: 0, -EEXIST, or another error. */
static int place_new(const char *tmp, const char *path)
{
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    int e = errno;
    if (e == EEXIST)
        return -EEXIST;
    if (e != EPERM && e != ENOTSUP && e != EOPNOTSUPP && e != EXDEV && e != EMLINK &&
        e != ENOSYS)
        return -e;
    /* A file system without hard links: rename, with a moment between the
     * check and the move in which a racing process could lose its file. */
    struct stat st;
    if (lstat(path, &st) == 0)
        return -EEXIST;
    if (rename(tmp, path) != 0)
        return -errno;
    return 0;
}

/* ---- when this process started, and who started it ---------------------- */

static void process_start(struct timespec *out)
{
    clock_gettime(CLOCK_REALTIME, out);   /* fallback: now (this image) */
#ifdef __linux__
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    /* Field 2 is the command name in parentheses and may hold spaces:
     * count from the last ')'.  Field 22 is the start time in clock ticks
     * since boot, on the boot-time clock. */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return;
    for (int field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL)
        return;
    char *end;
    unsigned long long ticks = strtoull(p + 1, &end, 10);
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec boot, real;
    if (end == p + 1 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0 ||
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
#endif
}

#ifdef __linux__
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
#endif

/* 1 if this process was started by a Python process profiling to the same
 * PYSAMPLE_OUTPUT (so it is not the first process of the run). */
static int started_by_profiled_python(void)
{
#ifdef __linux__
    pid_t pp = getppid();
    if (pp <= 1)
        return 0;
    return environ_has(pp, "PYSAMPLE_OUTPUT", O.tmpl) && maps_us_and_python(pp);
#else
    return 0;
#endif
}

/* ---- names --------------------------------------------------------------- */

/* "dir/prof.txt" + ".12" -> "dir/prof.12.txt"; no extension: appended. */
static int insert_before_ext(const char *path, const char *ins, char *out, size_t len)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot == NULL || dot == base)
        dot = path + strlen(path);
    int n = snprintf(out, len, "%.*s%s%s", (int)(dot - path), path, ins, dot);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Candidate k of this process (see the top of the file). */
static int candidate(unsigned k, char *out, size_t len)
{
    char base[4096], ins[64];
    if (expand(O.tmpl, base, sizeof base) != 0)
        return -EINVAL;
    if (!O.has_pid)
        k += O.lineage == 1 ? 1 : 0;
    if (k == 0) {
        if (strlen(base) >= len)
            return -ENAMETOOLONG;
        strcpy(out, base);
        return 0;
    }
    if (O.has_pid)
        snprintf(ins, sizeof ins, ".%u", k);
    else if (k == 1)
        snprintf(ins, sizeof ins, ".%ld", (long)getpid());
    else
        snprintf(ins, sizeof ins, ".%ld.%u", (long)getpid(), k - 1);
    return insert_before_ext(base, ins, out, len);
}

static int before_we_started(const struct stat *st)
{
    struct timespec m = ps_stat_mtime(st);
    return m.tv_sec < O.proc_start.tv_sec ||
           (m.tv_sec == O.proc_start.tv_sec && m.tv_nsec < O.proc_start.tv_nsec);
}

static void note_skipped(const char *path, const struct stat *st, const char *instead)
{
    char msg[8400];
    if (O.note == NULL || strcmp(O.noted, path) == 0)
        return;
    snprintf(O.noted, sizeof O.noted, "%s", path);
    const char *what = S_ISLNK(st->st_mode) ? "a symbolic link" :
                       S_ISDIR(st->st_mode) ? "a directory" :
                       !S_ISREG(st->st_mode) ? "not a regular file" : "another user's file";
    snprintf(msg, sizeof msg, "%s is %s, which we neither follow nor replace; the profile "
             "goes to %s", path, what, instead);
    O.note(msg);
}

int ps_output_init(const char *tmpl, int file_mode, ps_output_note_fn note,
                   char *why, size_t whylen)
{
    char path[4096], tmp[4200];
    struct timespec now;
    snprintf(O.tmpl, sizeof O.tmpl, "%s", tmpl);
    O.mode = file_mode;
    O.note = note;
    O.has_pid = ps_template_has_pid(tmpl);
    clock_gettime(CLOCK_REALTIME, &now);
    O.start_time = (long)now.tv_sec;
    process_start(&O.proc_start);
    if (expand(tmpl, path, sizeof path) != 0) {
        snprintf(why, whylen, "PYSAMPLE_OUTPUT='%.200s' has an unknown %%-placeholder "
                 "(known: %%p %%h %%t %%%%) or is too long", tmpl);
        return -1;
    }
    /* Prove now that the directory takes our files: a user should learn
     * at start-up, not after an hour of profiling, that nothing will be
     * written. */
    int fd = open_temp(path, file_mode, tmp, sizeof tmp);
    if (fd < 0) {
        snprintf(why, whylen, "cannot write the profile to '%.300s': %s", path, strerror(-fd));
        return -1;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

void ps_output_after_fork(void)
{
    /* A new process, started now, and not the first one: the parent's name
     * is not ours to claim. */
    O.claimed = 0;
    O.lineage = 1;
    O.noted[0] = '\0';
    clock_gettime(CLOCK_REALTIME, &O.proc_start);
}

/* Writes this process's profile to its name (see the top of the file). */
static int write_own(const char *data, size_t len, char *written, size_t writtenlen)
{
    char path[4096], tmp[4200], skipped[4096] = "";
    struct stat tmpst, st, skipped_st;
    int rc;

    if (!O.has_pid && O.lineage < 0)
        O.lineage = started_by_profiled_python();
    if ((rc = candidate(0, path, sizeof path)) != 0)
        return rc;
    /* Every candidate is in the same directory as the first. */
    if ((rc = write_temp(path, data, len, O.mode, tmp, sizeof tmp, &tmpst)) != 0)
        return rc;
    for (unsigned k = O.claimed ? O.cand : 0; k < PS_MAX_CANDIDATES; k++) {
        if ((rc = candidate(k, path, sizeof path)) != 0)
            break;
        int placed;
        if (lstat(path, &st) != 0) {
            if (errno != ENOENT) {
                rc = -errno;
                break;
            }
            placed = place_new(tmp, path);
            if (placed == -EEXIST)
                continue;   /* another process took it this very moment */
            if (placed != 0) {
                rc = placed;
                break;
            }
        } else {
            int mine = O.claimed && k == O.cand && st.st_dev == O.dev && st.st_ino == O.ino;
            int left_over = S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                            before_we_started(&st);
            if (!mine && !left_over) {
                if ((!S_ISREG(st.st_mode) || st.st_uid != geteuid()) && !skipped[0]) {
                    snprintf(skipped, sizeof skipped, "%s", path);
                    skipped_st = st;
                }
                continue;   /* another process's profile, or not ours at all */
            }
            if (rename(tmp, path) != 0) {
                rc = -errno;
                break;
            }
        }
        O.claimed = 1;
        O.cand = k;
        O.dev = tmpst.st_dev;
        O.ino = tmpst.st_ino;
        if (skipped[0])
            note_skipped(skipped, &skipped_st, path);
        if (written != NULL)
            snprintf(written, writtenlen, "%s", path);
        return 0;
    }
    unlink(tmp);
    return rc != 0 ? rc : -EEXIST;
}

int ps_output_write(const char *tmpl, const char *data, size_t len,
                    char *written, size_t writtenlen)
{
    char path[4096];
    if (tmpl == NULL)
        return write_own(data, len, written, writtenlen);
    char host[256];
    host_name(host, sizeof host);
    if (ps_expand_path(tmpl, (long)getpid(), host, O.start_time, path, sizeof path) != 0)
        return -EINVAL;
    int rc = ps_write_atomic(path, data, len, O.mode);
    if (rc == 0 && written != NULL)
        snprintf(written, writtenlen, "%s", path);
    return rc;
}
