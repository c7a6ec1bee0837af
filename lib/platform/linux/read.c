/*
 * linux/read.c - the syscall path of ps_read(): copies that fail with
 * EFAULT instead of faulting.
 *
 * Two methods, tried in this order (figures from test/bench/bench_read.c,
 * docs/safety.md):
 *   process_vm_readv  on our own pid: one call, no ptrace permission needed
 *                     for the caller's own process.  Container seccomp
 *                     profiles often refuse it (ENOSYS or EPERM).
 *   procmem           pread() from /proc/self/mem at the address: one call;
 *                     an unmapped address fails (EIO).  Unlike the others
 *                     it reads PROT_NONE pages (the kernel forces access
 *                     for /proc/PID/mem): zeros or data, never a fault.
 * Two more exist for tests and benchmarks only (PYSAMPLE_READ_MODE=file,
 * pipe), never chosen on their own, because they write through a number
 * the program can take (below):
 *   file              pwrite() *from* the address into a memfd (or an
 *                     unlinked temporary file) that we also keep mapped:
 *                     the kernel checks the source and fails with EFAULT
 *                     or writes short; the bytes are then memcpy'd out of
 *                     the mapping.  One call plus an fstat (see below).
 *   pipe              write() from the address into a pipe, read() back.
 *                     Two calls plus two fstats; kept as the last resort
 *                     because pipes exist everywhere.
 * Each is probed at start-up; a method refused later by policy (ENOSYS,
 * EPERM: a seccomp filter applied after we started) moves us down the list
 * for good.
 *
 * Descriptors the program can take.  Our descriptors are numbers in the
 * program's table: it can close them behind our back (os.closerange, a
 * forked child closing everything before exec) and a number can then name
 * one of its files; another thread can even dup2() its file onto our
 * number between any check of ours and our use of it.  So they are held
 * at high numbers (util/ownfd.h: the program's own open() takes the lowest
 * free one, never ours), before each use the descriptor's device and inode
 * are compared with ours (on a mismatch the number is forgotten and a new
 * descriptor made), and the methods chosen automatically only *read*
 * through a descriptor.  A read is not always harmless: a pread() of
 * /dev/kmsg takes a record from the program's reader, so the check before
 * it is what keeps us off the program's files; one made again after the
 * read throws away the bytes of a file dup2()ed on in between (that
 * window, an fstat wide, stays: docs/safety.md).  Pipes, sockets and
 * terminals refuse pread (ESPIPE).  The file and pipe methods write
 * through the number; between the check and the write the program could
 * have put its file there, and interpreter memory would land in it.  No
 * check closes that window (docs/safety.md), so they are never chosen on
 * their own.
 *
 * After fork the pipe or file is shared with the parent, whose sampler uses
 * it at the same time: the child drops its inherited copies and makes its
 * own (ps_plat_read_after_fork).
 *
 * The descriptor methods carry one read at a time: a second reader that
 * arrives meanwhile is refused (-1) rather than interleaved.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "platform/platform.h"
#include "platform/target.h"
#include "util/ownfd.h"

#define FILE_WINDOW (64 * 1024)  /* bytes copied per pwrite on the file path */

enum via { VIA_VM_READV, VIA_PROCMEM, VIA_FILE, VIA_PIPE, VIA_NONE };

/* The last method chosen without PYSAMPLE_READ_MODE (above). */
#define VIA_LAST_AUTO VIA_PROCMEM

static enum via via = VIA_VM_READV;
static int forced;               /* one method only (tests, PYSAMPLE_READ_MODE) */
static pid_t self_pid;
static atomic_flag busy = ATOMIC_FLAG_INIT;

/* Held high and checked before every use (util/ownfd.h): the program's
 * first open() still gets 3, and a closerange() followed by an open of its
 * own rarely lands on one of them. */
static struct ps_fd pipe_r = PS_FD_NONE, pipe_w = PS_FD_NONE, file_fd = PS_FD_NONE,
                    mem_fd = PS_FD_NONE;
static unsigned char *file_map;

static int vm_readv_works(void)
{
    char probe[8];
    struct iovec l = { probe, sizeof probe }, r = { (void *)&self_pid, sizeof self_pid };
    return process_vm_readv(self_pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof self_pid;
}

static int open_procmem(void)
{
    int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char probe[sizeof self_pid];
    if (pread(fd, probe, sizeof probe, (off_t)(uintptr_t)&self_pid) != (ssize_t)sizeof probe) {
        close(fd);
        return -1;
    }
    return ps_fd_own(&mem_fd, fd) == 0 ? 0 : -1;
}

static int open_pipe(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    if (ps_fd_own(&pipe_r, p[0]) != 0) {
        close(p[1]);
        return -1;
    }
    if (ps_fd_own(&pipe_w, p[1]) != 0) {
        ps_fd_release(&pipe_r);
        return -1;
    }
    return 0;
}

static void close_file(void)
{
    if (file_map != NULL)
        munmap(file_map, FILE_WINDOW);
    file_map = NULL;
    ps_fd_release(&file_fd);
}

static int make_file(void)
{
    int fd = -1;
#ifdef SYS_memfd_create
    fd = (int)syscall(SYS_memfd_create, "pysample-read", 1u /* MFD_CLOEXEC */);
#endif
#ifdef O_TMPFILE
    static const char *const dirs[] = { "/dev/shm", "/tmp", "/var/tmp" };
    for (size_t i = 0; fd < 0 && i < sizeof dirs / sizeof dirs[0]; i++)
        fd = open(dirs[i], O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        char tmpl[] = "/tmp/pysample-read-XXXXXX";
        fd = mkostemp(tmpl, O_CLOEXEC);
        if (fd >= 0)
            unlink(tmpl);
    }
    return fd;
}

static int open_file(void)
{
    int fd = make_file();
    if (fd < 0)
        return -1;
    void *m = MAP_FAILED;
    if (ftruncate(fd, FILE_WINDOW) == 0)
        m = mmap(NULL, FILE_WINDOW, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return -1;
    }
    if (ps_fd_own(&file_fd, fd) != 0) {
        munmap(m, FILE_WINDOW);
        return -1;
    }
    file_map = m;
    return 0;
}

/* Opens what method v needs; 0 or -1. */
static int prepare(enum via v)
{
    switch (v) {
    case VIA_VM_READV:
        return vm_readv_works() ? 0 : -1;
    case VIA_PROCMEM:
        if (ps_fd_ours(&mem_fd))
            return 0;
        ps_fd_release(&mem_fd);
        return open_procmem();
    case VIA_FILE:
        if (ps_fd_ours(&file_fd) && file_map != NULL)
            return 0;
        close_file();
        return open_file();
    case VIA_PIPE:
        if (ps_fd_ours(&pipe_r) && ps_fd_ours(&pipe_w))
            return 0;
        ps_fd_release(&pipe_r);
        ps_fd_release(&pipe_w);
        return open_pipe();
    default:
        return -1;
    }
}

int ps_plat_read_init(void)
{
    self_pid = getpid();
    forced = 0;
    for (via = VIA_VM_READV; via <= VIA_LAST_AUTO; via++)
        if (prepare(via) == 0)
            return 0;
    via = VIA_NONE;
    return -1;
}

/* The next method that works after the current one, for good. */
static void move_down(void)
{
    while (via < VIA_LAST_AUTO) {
        via++;
        if (prepare(via) == 0)
            return;
    }
    via = VIA_NONE;
}

int ps_plat_read_force(const char *method)
{
    self_pid = getpid();
    if (method == NULL || strcmp(method, "auto") == 0 || strcmp(method, "syscall") == 0)
        return ps_plat_read_init();
    enum via v;
    if (strcmp(method, "process_vm_readv") == 0)
        v = VIA_VM_READV;
    else if (strcmp(method, "procmem") == 0)
        v = VIA_PROCMEM;
    else if (strcmp(method, "file") == 0)
        v = VIA_FILE;
    else if (strcmp(method, "pipe") == 0)
        v = VIA_PIPE;
    else
        return -1;
    forced = 1;
    via = v;
    if (prepare(v) != 0) {
        via = VIA_NONE;
        return -1;
    }
    return 0;
}

/* All of n bytes at src from /proc/self/mem through fd: 0 or -1. */
static int pread_all(int fd, char *out, uintptr_t src, size_t n)
{
    while (n > 0) {
        ssize_t r = pread(fd, out, n, (off_t)src);
        if (r <= 0)
            return -1;  /* EIO: some byte is unmapped */
        out += r;
        src += (uintptr_t)r;
        n -= (size_t)r;
    }
    return 0;
}

/*
 * A pread of /proc/self/mem at src.  The descriptor is checked before the
 * read: a number the program took (closerange, then an open of its own)
 * is never read through, since a read can be what changes the program's
 * file (/dev/kmsg hands each record to one read only).  It is forgotten
 * (not closed: it is the program's) and a new descriptor made.  It is
 * checked again after the read: a program's dup2() onto the number between
 * the two gave us its file's bytes, which are thrown away and the read
 * made once more.  That dup2 window, between an fstat and the pread, is
 * the one left (docs/safety.md).  Two fstats per read.
 */
static int read_procmem(void *dst, uintptr_t src, size_t n)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!ps_fd_ours(&mem_fd)) {
            mem_fd.fd = -1;
            if (open_procmem() != 0)
                return -1;
        }
        int rc = pread_all(mem_fd.fd, dst, src, n);
        if (ps_fd_ours(&mem_fd))
            return rc;
        mem_fd.fd = -1;
    }
    return -1;
}

static int read_file(void *dst, uintptr_t src, size_t n)
{
    char *out = dst;
    if (!ps_fd_ours(&file_fd) && prepare(VIA_FILE) != 0)
        return -1;
    while (n > 0) {
        size_t chunk = n < FILE_WINDOW ? n : FILE_WINDOW;
        ssize_t w = pwrite(file_fd.fd, (const void *)src, chunk, 0);
        if (w != (ssize_t)chunk)
            return -1;  /* EFAULT, or short: some byte is unreadable */
        memcpy(out, file_map, chunk);
        out += chunk;
        src += chunk;
        n -= chunk;
    }
    return 0;
}

static int read_pipe(void *dst, uintptr_t src, size_t n)
{
    char *out = dst;
    if ((!ps_fd_ours(&pipe_r) || !ps_fd_ours(&pipe_w)) && prepare(VIA_PIPE) != 0)
        return -1;
    while (n > 0) {
        size_t chunk = n < 4096 ? n : 4096;
        ssize_t w = write(pipe_w.fd, (const void *)src, chunk);
        if (w <= 0)
            return -1;  /* EFAULT: nothing was written, the pipe stays empty */
        ssize_t r = read(pipe_r.fd, out, (size_t)w);
        if (r != w) {
            /* Cannot happen with an empty pipe; if it did, bytes left in
             * the pipe would corrupt the next read: start a fresh one. */
            ps_fd_release(&pipe_r);
            ps_fd_release(&pipe_w);
            return -1;
        }
        if ((size_t)w < chunk)
            return -1;  /* the rest is unreadable */
        out += w;
        src += (uintptr_t)w;
        n -= (size_t)w;
    }
    return 0;
}

/* Refused by policy (not a bad address): move down the list for good. */
static int refused(int err)
{
    return err == ENOSYS || err == EPERM;
}

int ps_plat_read(void *dst, uintptr_t src, size_t n)
{
    int saved_errno = errno;
    int rc = -1;
    if (via == VIA_VM_READV) {
        struct iovec l = { dst, n }, r = { (void *)src, n };
        ssize_t got = process_vm_readv(self_pid, &l, 1, &r, 1, 0);
        if (got == (ssize_t)n) {
            errno = saved_errno;
            return 0;
        }
        if (got >= 0 || !refused(errno) || forced) {
            errno = saved_errno;
            return -1;
        }
        move_down();
    }
    if (via == VIA_PROCMEM || via == VIA_FILE || via == VIA_PIPE) {
        /* One reader at a time: a second one would race the first's
         * re-opening of the descriptor. */
        if (atomic_flag_test_and_set(&busy)) {
            errno = saved_errno;
            return -1;
        }
        enum via v = via;
        rc = v == VIA_PROCMEM ? read_procmem(dst, src, n) :
             v == VIA_FILE ? read_file(dst, src, n) : read_pipe(dst, src, n);
        atomic_flag_clear(&busy);
    }
    errno = saved_errno;
    return rc;
}

/* Linux delivers a bad access as SIGSEGV/SIGBUS straight to the handler
 * memread.c installs and watches: the direct path is fine here. */
int ps_plat_read_direct_ok(void)
{
    return 1;
}

const char *ps_plat_read_name(void)
{
    switch (via) {
    case VIA_VM_READV: return "process_vm_readv";
    case VIA_PROCMEM: return "procmem";
    case VIA_FILE: return "file";
    case VIA_PIPE: return "pipe";
    default: return "none";
    }
}

void ps_plat_read_after_fork(void)
{
    /* A new pid for process_vm_readv, and our own pipe and file: the
     * parent's sampler keeps using the inherited ones. */
    self_pid = getpid();
    atomic_flag_clear(&busy);
    int had_pipe = pipe_r.fd >= 0, had_file = file_fd.fd >= 0, had_mem = mem_fd.fd >= 0;
    ps_fd_release(&pipe_r);
    ps_fd_release(&pipe_w);
    ps_fd_release(&mem_fd);   /* the parent's /proc/self/mem: the parent's memory */
    close_file();
    if ((had_pipe && via == VIA_PIPE) || (had_file && via == VIA_FILE) ||
        (had_mem && via == VIA_PROCMEM)) {
        if (prepare(via) != 0 && !forced)
            move_down();
    }
}

/* target.h: process_vm_readv on another pid, and nothing else: the other
 * methods read /proc/self.  Forced, so a refusal is a failed read, never a
 * move down the list to our own memory. */
int ps_plat_read_target(pid_t pid, uintptr_t probe)
{
    char buf[8];
    struct iovec l = { buf, sizeof buf }, r = { (void *)probe, sizeof buf };
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof buf)
        return -1;
    self_pid = pid;
    forced = 1;
    via = VIA_VM_READV;
    return 0;
}
