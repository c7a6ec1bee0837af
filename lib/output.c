/*
 * output.c - where the output is written.
 *
 * Atomicity.  The profile is written to a temporary file created next to
 * the target (same directory, so same file system) with O_EXCL|O_NOFOLLOW
 * and mode 0600 (PYSAMPLE_FILE_MODE), then rename()d over the target.
 * rename() replaces the directory entry in one step: a reader sees either
 * the previous complete profile or the new one.  It also never follows a
 * symlink planted at the target: the link itself is replaced.
 *
 * One file per process.  With %p in the template every process has its own
 * name.  Without it, several processes (forked workers, exec'd children)
 * would share one name, so the name goes to whichever process claims it
 * first, and never to two:
 *   - a process claims the plain name on its first write if no file is
 *     there, or if the file there is older than this process (a profile
 *     left by an earlier run, which we replace as the user expects);
 *   - a file there that is newer than this process belongs to another
 *     process of this run: we write "<name>.<pid>" instead;
 *   - once claimed, the name stays ours only while the file there is the
 *     one we wrote (same device and inode); a forked child never inherits
 *     the claim.
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

#include "config.h"
#include "output.h"
#include "platform.h"

static struct {
    char tmpl[4096];
    int mode;
    long start_time;     /* seconds: for %t and the "older than us" rule */
    struct timespec start;
    int claimed;         /* the plain name is ours */
    dev_t dev;
    ino_t ino;
    unsigned counter;
} O = { .mode = 0600 };

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
                         O.counter++);
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

int ps_write_atomic(const char *path, const char *data, size_t len, int mode)
{
    char tmp[4200];
    int fd = open_temp(path, mode, tmp, sizeof tmp);
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
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

int ps_output_init(const char *tmpl, int file_mode, char *why, size_t whylen)
{
    char path[4096], tmp[4200];
    snprintf(O.tmpl, sizeof O.tmpl, "%s", tmpl);
    O.mode = file_mode;
    clock_gettime(CLOCK_REALTIME, &O.start);
    O.start_time = (long)O.start.tv_sec;
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
    O.claimed = 0;
}

static int newer_than_us(const struct stat *st)
{
    struct timespec m = ps_stat_mtime(st);
    return m.tv_sec > O.start.tv_sec ||
           (m.tv_sec == O.start.tv_sec && m.tv_nsec >= O.start.tv_nsec);
}

/* Picks the path for this process's profile (see the top of this file). */
static int choose_path(char *path, size_t len)
{
    if (expand(O.tmpl, path, len) != 0)
        return -EINVAL;
    if (ps_template_has_pid(O.tmpl))
        return 0;
    struct stat st;
    int exists = lstat(path, &st) == 0;
    int ours = O.claimed && exists && st.st_dev == O.dev && st.st_ino == O.ino;
    if (ours || (!O.claimed && (!exists || (S_ISREG(st.st_mode) && !newer_than_us(&st)))))
        return 1;  /* plain name, to be (re)claimed after writing */
    size_t n = strlen(path);
    if (snprintf(path + n, len - n, ".%ld", (long)getpid()) >= (int)(len - n))
        return -ENAMETOOLONG;
    return 0;
}

int ps_output_write(const char *tmpl, const char *data, size_t len,
                    char *written, size_t writtenlen)
{
    char path[4096];
    int rc;
    if (tmpl != NULL) {
        char host[256];
        host_name(host, sizeof host);
        if (ps_expand_path(tmpl, (long)getpid(), host, O.start_time, path, sizeof path) != 0)
            return -EINVAL;
        rc = ps_write_atomic(path, data, len, O.mode);
    } else {
        int plain = choose_path(path, sizeof path);
        if (plain < 0)
            return plain;
        rc = ps_write_atomic(path, data, len, O.mode);
        struct stat st;
        if (rc == 0 && plain == 1 && lstat(path, &st) == 0) {
            O.claimed = 1;
            O.dev = st.st_dev;
            O.ino = st.st_ino;
        }
    }
    if (rc == 0 && written != NULL)
        snprintf(written, writtenlen, "%s", path);
    return rc;
}
