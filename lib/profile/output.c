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
 *     variable, our library and a Python mapped: platform.h,
 *     ps_parent_profiles_to).  A process that cannot
 *     tell (its parent already gone) still never takes a name another
 *     process of this run holds, by the next rule.
 * A template that names a directory (a trailing '/', or a directory at its
 * expansion) stands for <directory>/pysample-%p.txt, `pysample record`'s
 * name for a profile; %h never adds a directory (host_name).
 * A file at a candidate name is "left over" when it is a regular file of
 * ours (same owner) last written before this process started: a profile of
 * an earlier run, or of an earlier process that had our pid, which we
 * replace as the user expects.  A file written after this process started
 * belongs to another process of this run (or to this process before an
 * exec) and is never replaced.  Anything else at a candidate (a symbolic
 * link, a directory, another user's file) is left alone and reported once.
 * "Started" is the process's start time (platform.h; on Linux from
 * /proc/self/stat and the leader's /proc/self/task/<pid>/stat, as qemu-user
 * fakes the first), which an exec keeps, with 10 ms to spare for the clock
 * tick it is rounded to; not known (no /proc), no file is left over.
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

#include "config.h"
#include "profile/output.h"
#include "platform/platform.h"
#include "util/message.h"

#define PS_MAX_CANDIDATES 100
/* The profile's name in a directory the user named: the one `pysample
 * record` gives a profile (docs/configuration.md). */
#define PS_NAME_IN_DIRECTORY "pysample-%p.txt"

static struct {
    const char *tmpl;           /* the settings' template (settings.h): not a copy */
    int in_directory;           /* it names a directory (see in_directory) */
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
    char noted[4096];           /* the last name we said something about */
} output = { .mode = 0600, .lineage = -1 };

/*
 * %h as one file name component.  A host name is whatever sethostname()
 * was given (a UTS namespace, a pod's spec): a '/' in it would move the
 * profile to another directory, and a whole name "." or ".." would name
 * the directory itself or its parent.  Each '/' becomes '_', and a name
 * that is empty or only dots gets its dots as '_'.
 */
static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
    size_t dots = strspn(buf, ".");
    if (buf[dots] == '\0')
        memset(buf, '_', dots);
    if (buf[0] == '\0')
        snprintf(buf, len, "_");
    for (char *c = buf; *c; c++)
        if (*c == '/')
            *c = '_';
}

static int expand(const char *tmpl, char *out, size_t outlen)
{
    char host[256];
    host_name(host, sizeof host);
    return ps_expand_path(tmpl, (long)getpid(), host, output.start_time, out, outlen);
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
                         __atomic_fetch_add(&output.counter, 1, __ATOMIC_RELAXED));
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

/* put for a file descriptor: all of data, or a negative errno. */
static int put_fd(void *ctx, const char *data, size_t len)
{
    int fd = *(const int *)ctx;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        off += (size_t)w;
    }
    return 0;
}

/* fill for content that is one buffer. */
struct buffer {
    const char *data;
    size_t len;
};

static int fill_buffer(void *ctx, ps_output_put_fn put, void *put_ctx)
{
    const struct buffer *b = ctx;
    return put(put_ctx, b->data, b->len);
}

/* What a file is filled with: fill called with ctx. */
struct content {
    ps_output_fill_fn fill;
    void *ctx;
};

/* Writes c's content to a new temporary file next to path; its identity
 * in *st.  A failed fill leaves no file behind. */
static int write_temp(const char *path, const struct content *c, int mode, char *tmp,
                      size_t tmplen, struct stat *st)
{
    int fd = open_temp(path, mode, tmp, tmplen);
    if (fd < 0)
        return fd;
    /* The umask may have narrowed the mode; the user asked for this one. */
    fchmod(fd, (mode_t)mode);
    int rc = c->fill(c->ctx, put_fd, &fd);
    if (rc != 0) {
        close(fd);
        unlink(tmp);
        return rc < 0 ? rc : -EIO;
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

static int write_atomic_with(const char *path, ps_output_fill_fn fill, void *ctx, int mode)
{
    char tmp[4200];
    const struct content c = {fill, ctx};
    int rc = write_temp(path, &c, mode, tmp, sizeof tmp, NULL);
    if (rc != 0)
        return rc;
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

const char *ps_output_strerror(int rc)
{
    switch (-rc) {
    case PS_OUTPUT_REFUSED_LINK:
        return "a symbolic link is there, which the library neither follows nor replaces";
    case PS_OUTPUT_REFUSED_DIR:
        return "a directory is there";
    case PS_OUTPUT_REFUSED_SPECIAL:
        return "something that is not a regular file is there, which the library does not replace";
    case PS_OUTPUT_REFUSED_OTHERS:
        return "another user's file is there, which the library does not replace";
    default:
        return strerror(-rc);
    }
}

/* 0 if a side file may be written at path (nothing there, or a regular
 * file of ours); else -PS_OUTPUT_REFUSED_* for what is there. */
static int side_name_free(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_uid == geteuid()))
        return 0;
    return S_ISLNK(st.st_mode) ? -PS_OUTPUT_REFUSED_LINK :
           S_ISDIR(st.st_mode) ? -PS_OUTPUT_REFUSED_DIR :
           !S_ISREG(st.st_mode) ? -PS_OUTPUT_REFUSED_SPECIAL : -PS_OUTPUT_REFUSED_OTHERS;
}

/*
 * A side file (PYSAMPLE_STATS, the quality sidecar) goes where the profile
 * would: never through or over what another user may have planted there.
 * A symbolic link, a directory or another user's file at path is left
 * alone (side_name_free).  The check and the rename are two steps: a link
 * planted between them is replaced by rename(), which never follows it, so
 * the file it points to is untouched either way.
 */
int ps_write_atomic(const char *path, const char *data, size_t len, int mode)
{
    struct buffer b = { data, len };
    int rc = side_name_free(path);
    return rc != 0 ? rc : write_atomic_with(path, fill_buffer, &b, mode);
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

/* The template names come from, into out: the settings' own, or for a
 * directory <it>/pysample-%p.txt, made on each use rather than kept. */
static int resolved(char *out, size_t len)
{
    if (output.tmpl == NULL)
        return -EINVAL;  /* no ps_output_init: nothing configured */
    size_t n = strlen(output.tmpl);
    const char *sep = n > 0 && output.tmpl[n - 1] == '/' ? "" : "/";
    int w = output.in_directory
                ? snprintf(out, len, "%s%s%s", output.tmpl, sep, PS_NAME_IN_DIRECTORY)
                : snprintf(out, len, "%s", output.tmpl);
    return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* Whether a parent profiles to the same template (the top of the file);
 * its own frame, so that the name is off the stack before a write. */
static void find_lineage(void)
{
    char tmpl[4096];
    if (resolved(tmpl, sizeof tmpl) == 0)
        output.lineage = ps_parent_profiles_to(tmpl);
}

/* Candidate k of this process (see the top of the file). */
static int candidate(unsigned k, char *out, size_t len)
{
    char tmpl[4096], base[4096], ins[64];
    if (resolved(tmpl, sizeof tmpl) != 0 || expand(tmpl, base, sizeof base) != 0)
        return -EINVAL;
    if (!output.has_pid)
        k += output.lineage == 1 ? 1 : 0;
    if (k == 0) {
        if (strlen(base) >= len)
            return -ENAMETOOLONG;
        strcpy(out, base);
        return 0;
    }
    if (output.has_pid)
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
    return m.tv_sec < output.proc_start.tv_sec ||
           (m.tv_sec == output.proc_start.tv_sec && m.tv_nsec < output.proc_start.tv_nsec);
}

static void note_skipped(const char *path, const struct stat *st, const char *instead)
{
    if (strcmp(output.noted, path) == 0)
        return;
    snprintf(output.noted, sizeof output.noted, "%s", path);
    const char *what = S_ISLNK(st->st_mode) ? "a symbolic link" :
                       S_ISDIR(st->st_mode) ? "a directory" :
                       !S_ISREG(st->st_mode) ? "not a regular file" : "another user's file";
    ps_say("%s is %s, which we neither follow nor replace; the profile goes to %s", path, what,
           instead);
}

/* 1 if PYSAMPLE_OUTPUT names a directory (path: its expansion): it ends in
 * '/', or something there is a directory (or a link to one). */
static int names_directory(const char *tmpl, const char *path)
{
    struct stat st;
    size_t n = strlen(tmpl);
    return (n > 0 && tmpl[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* The template becomes <directory>/pysample-%p.txt: a file named like the
 * others, that ls shows (writing the directory's own name as a temporary
 * file's base made an invisible "<dir>/.<pid>"). */
static int in_directory(const char *tmpl, char *resolved_tmpl, size_t len, char *why,
                        size_t whylen)
{
    output.in_directory = 1;
    if (resolved(resolved_tmpl, len) != 0) {
        snprintf(why, whylen, "PYSAMPLE_OUTPUT='%.200s' is a directory, and with the profile's "
                 "name it is too long", tmpl);
        return -1;
    }
    output.has_pid = 1;
    return 0;
}

/* A profile is a regular file in a directory of files.  A name in /dev
 * (/dev/stderr, /dev/fd/N lead to whatever the program has open there) or
 * one that is a device, FIFO or socket would get our temporary file and the
 * rename beside it, into /dev as root: refused, and said (issue #39). */
static int not_a_file(const char *path, char *why, size_t whylen)
{
    char dir[4096], real[PATH_MAX];
    struct stat st;
    dir_of(path, dir, sizeof dir);
    const char *d = realpath(dir, real) != NULL ? real : dir;
    if (strcmp(d, "/dev") == 0 || strncmp(d, "/dev/", 5) == 0) {
        snprintf(why, whylen, "PYSAMPLE_OUTPUT='%.300s' is in /dev, where profiles are not "
                 "written (PYSAMPLE_OUTPUT=/dev/null or unset: off)", path);
        return 1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "PYSAMPLE_OUTPUT='%.300s' is a device, FIFO or socket, not a "
                 "file", path);
        return 1;
    }
    return 0;
}

int ps_output_init(const char *tmpl, int file_mode, char *why, size_t whylen)
{
    char path[4096], tmp[4200], dir_tmpl[4096];
    struct timespec now;
    output.tmpl = tmpl;
    output.in_directory = 0;
    output.mode = file_mode;
    output.has_pid = ps_template_has_pid(tmpl);
    clock_gettime(CLOCK_REALTIME, &now);
    output.start_time = (long)now.tv_sec;
    ps_process_start_time(&output.proc_start);
    if (expand(tmpl, path, sizeof path) != 0) {
        snprintf(why, whylen, "PYSAMPLE_OUTPUT='%.200s' has an unknown %%-placeholder "
                 "(known: %%p %%h %%t %%%%) or is too long", tmpl);
        return -1;
    }
    if (names_directory(tmpl, path)) {
        if (in_directory(tmpl, dir_tmpl, sizeof dir_tmpl, why, whylen) != 0)
            return -1;
        expand(dir_tmpl, path, sizeof path);
    }
    if (not_a_file(path, why, whylen))
        return -1;
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
    output.claimed = 0;
    output.lineage = 1;
    output.noted[0] = '\0';
    clock_gettime(CLOCK_REALTIME, &output.proc_start);
}

/* The first name seen on the way to ours that is not a profile of this
 * user (a link, a directory, another user's file): said once a name is
 * found. */
struct skipped {
    char path[4096];
    struct stat st;
};

/* Moves the temporary file tmp to path, this process's candidate k, if the
 * name is free, ours already or left over (see the top of the file).  0
 * placed; 1 the name is another's, try the next; or -errno. */
static int place_at(unsigned k, const char *tmp, const char *path, struct skipped *sk)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return -errno;
        int placed = place_new(tmp, path);
        return placed == -EEXIST ? 1 : placed;  /* EEXIST: taken this very moment */
    }
    int mine = output.claimed && k == output.cand && st.st_dev == output.dev &&
               st.st_ino == output.ino;
    int left_over = S_ISREG(st.st_mode) && st.st_uid == geteuid() && before_we_started(&st);
    if (!mine && !left_over) {
        if ((!S_ISREG(st.st_mode) || st.st_uid != geteuid()) && !sk->path[0]) {
            snprintf(sk->path, sizeof sk->path, "%s", path);
            sk->st = st;
        }
        return 1;   /* another process's profile, or not ours at all */
    }
    return rename(tmp, path) != 0 ? -errno : 0;
}

/* Candidate k is this process's name from now on, while the file it
 * wrote (tmpst) is there. */
static void claim(unsigned k, const struct stat *tmpst)
{
    output.claimed = 1;
    output.cand = k;
    output.dev = tmpst->st_dev;
    output.ino = tmpst->st_ino;
}

/* Writes this process's profile to its name (see the top of the file). */
static int write_own(ps_output_fill_fn fill, void *ctx, char *written, size_t writtenlen)
{
    char path[4096], tmp[4200];
    const struct content c = {fill, ctx};
    struct skipped sk = { .path = "" };
    struct stat tmpst;
    int rc;

    if (!output.has_pid && output.lineage < 0)
        find_lineage();
    if ((rc = candidate(0, path, sizeof path)) != 0)
        return rc;
    /* Every candidate is in the same directory as the first. */
    if ((rc = write_temp(path, &c, output.mode, tmp, sizeof tmp, &tmpst)) != 0)
        return rc;
    for (unsigned k = output.claimed ? output.cand : 0; k < PS_MAX_CANDIDATES; k++) {
        if ((rc = candidate(k, path, sizeof path)) != 0 ||
            (rc = place_at(k, tmp, path, &sk)) < 0)
            break;
        if (rc > 0)
            continue;
        claim(k, &tmpst);
        if (sk.path[0])
            note_skipped(sk.path, &sk.st, path);
        if (written != NULL)
            snprintf(written, writtenlen, "%s", path);
        return 0;
    }
    unlink(tmp);
    return rc < 0 ? rc : -EEXIST;
}

int ps_output_write_with(const char *tmpl, ps_output_fill_fn fill, void *ctx,
                         char *written, size_t writtenlen)
{
    char path[4096];
    if (tmpl == NULL)
        return write_own(fill, ctx, written, writtenlen);
    char host[256];
    host_name(host, sizeof host);
    if (ps_expand_path(tmpl, (long)getpid(), host, output.start_time, path, sizeof path) != 0)
        return -EINVAL;
    int rc = write_atomic_with(path, fill, ctx, output.mode);
    if (rc == 0 && written != NULL)
        snprintf(written, writtenlen, "%s", path);
    return rc;
}

int ps_output_write_beside(const char *path, const char *suffix, ps_output_fill_fn fill,
                           void *ctx)
{
    char side[4200];
    int n = snprintf(side, sizeof side, "%s%s", path, suffix);
    if (n < 0 || (size_t)n >= sizeof side)
        return -ENAMETOOLONG;
    int rc = side_name_free(side);   /* as ps_write_atomic: planted by someone else */
    return rc != 0 ? rc : write_atomic_with(side, fill, ctx, output.mode);
}
