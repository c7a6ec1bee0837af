/*
 * test_memread.c - ps_read() never faults, on every path, and our fault
 * handler stays out of the program's way.
 *
 * The test is the "program": it installs its own SIGSEGV/SIGBUS handler
 * before the library's (so the library must chain to it), and later ones
 * after (which go into the program's view behind the library's handler:
 * the direct path stays, and the program's handlers must see exactly what
 * the kernel would have given them).  The library's real sigaction/signal
 * stand-ins are linked in (lib/platform/linux/interpose_sigaction.c, built
 * once for the library and this test) so that this goes through the same
 * code as in a real process.
 *
 * Scenarios that end a process (a genuine crash, a loop, a handler race)
 * run in a fresh copy of this executable: `test_memread <scenario>`.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/linux/linux.h"   /* ps_real_signal */
#include "read_path.h"
#include "util/owner.h"

static long page;

/* ---- the test's own fault handler (installed before the library's) ---- */

static _Thread_local sigjmp_buf *test_jump;   /* where a faulting test thread resumes */
static _Atomic int test_calls;
static _Atomic int test_bad_calls;           /* wrong signal, code or address */
static _Atomic int test_mask_ok;             /* SIGSEGV blocked inside, as the kernel does */
static void *_Atomic expect_addr;
static _Atomic int expect_code;

static void test_handler(int sig, siginfo_t *si, void *uc)
{
    atomic_fetch_add(&test_calls, 1);
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    if (sigismember(&cur, sig))
        atomic_fetch_add(&test_mask_ok, 1);
    if (sig != SIGSEGV || si == NULL || uc == NULL || si->si_code != atomic_load(&expect_code) ||
        (atomic_load(&expect_code) > 0 && si->si_addr != atomic_load(&expect_addr)))
        atomic_fetch_add(&test_bad_calls, 1);
    if (test_jump != NULL)
        siglongjmp(*test_jump, 1);
    /* A sent signal: returning is fine. */
}

/* sa as the three-argument handler h, SA_SIGINFO | flags, an empty mask. */
static void siginfo_action(struct sigaction *sa, void (*h)(int, siginfo_t *, void *), int flags)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = h;
    sa->sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa->sa_mask);
}

static void install_test_handler(int sig)
{
    struct sigaction sa;
    siginfo_action(&sa, test_handler, 0);
    CHECK(sigaction(sig, &sa, NULL) == 0);
}

/* ---- memory with holes ---- */

struct holes {
    unsigned char *good;      /* 8 readable pages, filled with a pattern */
    unsigned char *unmapped;  /* a page mapped then unmapped */
    unsigned char *prot_none; /* a PROT_NONE page */
    unsigned char *edge;      /* a readable page followed by an unmapped one */
    unsigned char *trunc;     /* a shared file mapping whose file was truncated */
    unsigned char *big;       /* 256 KiB readable */
};

static void make_holes(struct holes *h)
{
    /* Everything is mapped first and the holes are punched last, between
     * mappings that stay, so that no later mmap of this test lands in one
     * before it is used. */
    h->good = mmap(NULL, 8 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (long i = 0; i < 8 * page; i++)
        h->good[i] = (unsigned char)(i * 7 + 3);

    unsigned char *three = mmap(NULL, 3 * (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    h->unmapped = three + page;

    h->prot_none = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    h->edge = mmap(NULL, 3 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(h->edge, 0x5a, (size_t)page);

    char tmpl[] = "/tmp/test_memread-XXXXXX";
    int fd = mkstemp(tmpl);
    unlink(tmpl);
    CHECK(fd >= 0 && ftruncate(fd, 2 * page) == 0);
    h->trunc = mmap(NULL, 2 * (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(h->trunc != MAP_FAILED && ftruncate(fd, 0) == 0);
    close(fd);

    h->big = mmap(NULL, 256 * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < 256 * 1024; i++)
        h->big[i] = (unsigned char)(i ^ (i >> 8));
    CHECK(h->good != MAP_FAILED && three != MAP_FAILED && h->prot_none != MAP_FAILED &&
          h->edge != MAP_FAILED && h->big != MAP_FAILED);

    CHECK(munmap(h->unmapped, (size_t)page) == 0);
    CHECK(munmap(h->edge + page, (size_t)page) == 0);
}

/* ---- selecting a path ---- */

static const char *const paths[] = { "direct", "process_vm_readv", "procmem", "file", "pipe" };

static void check_path(const char *p, struct holes *h)
{
    unsigned char buf[256 * 1024];
    int fails_before = check_failures;

    /* Good reads come back intact, small and large (larger than the file
     * window and the pipe chunk). */
    size_t sizes[] = { 1, 8, 80, 4096, 16384, 3 * 4096 + 17 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(buf, 0, sizes[i]);
        CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->good + 5, sizes[i]), 0);
        CHECK(memcmp(buf, h->good + 5, sizes[i]) == 0);
    }
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->big, sizeof buf), 0);
    CHECK(memcmp(buf, h->big, sizeof buf) == 0);
    uintptr_t w = 0;
    CHECK_EQ_INT(ps_read_ptr((uintptr_t)h->good, &w), 0);
    CHECK(memcmp(&w, h->good, sizeof w) == 0);

    /* Every kind of bad address fails, and the process is still here. */
    uintptr_t bad[] = {
        0, 8, 4095,                                   /* NULL page */
        (uintptr_t)h->unmapped, (uintptr_t)h->unmapped + 100,
        (uintptr_t)h->prot_none, (uintptr_t)h->prot_none + 4000,
        (uintptr_t)h->edge + page,                    /* just past the edge */
        (uintptr_t)h->trunc, (uintptr_t)h->trunc + page, /* SIGBUS on direct */
        (uintptr_t)1 << 48,                           /* non-canonical on x86-64 */
        UINTPTR_MAX - 8,                              /* wraps */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* /proc/self/mem forces access: PROT_NONE pages read (as zeros
         * or data), without a fault (linux/read.c). */
        if (strcmp(p, "procmem") == 0 && (bad[i] == (uintptr_t)h->prot_none ||
                                          bad[i] == (uintptr_t)h->prot_none + 4000))
            continue;
        for (size_t k = 0; k < 3; k++) {
            size_t n = k == 0 ? 8 : k == 1 ? 80 : 16384;
            if (ps_read(buf, bad[i], n) != -1) {
                fprintf(stderr, "%s: read of %zu bytes at %#lx did not fail\n", p, n,
                        (unsigned long)bad[i]);
                check_failures++;
            }
        }
    }
    /* Reads that start in mapped memory and run into a hole fail too. */
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->edge + page - 8, 16), -1);
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->edge + page - 4096, 16384), -1);
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->edge, 2 * (size_t)page), -1);

    /* A page that was fine a moment ago and is unmapped now. */
    unsigned char *fresh = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fresh[10] = 42;
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)fresh, 16), 0);
    CHECK_EQ_INT(buf[10], 42);
    munmap(fresh, (size_t)page);
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)fresh, 16), -1);

    /* And good reads still work after all those failures. */
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->good + 100, 80), 0);
    CHECK(memcmp(buf, h->good + 100, 80) == 0);

    /* Jumping out of the handler left the signal mask as it was. */
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    CHECK(!sigismember(&cur, SIGSEGV) && !sigismember(&cur, SIGBUS));
    CHECK_EQ_STR(ps_mem_mode_name(), p);

    printf("%-17s %s\n", p, check_failures == fails_before ? "ok" : "FAILED");
}

/* ---- a fault on another thread goes to the test's handler ---- */

struct faulter_arg {
    unsigned char *addr;
    int rounds;
};

static void *faulter(void *argp)
{
    struct faulter_arg *a = argp;
    sigjmp_buf env;
    test_jump = &env;
    for (volatile int i = 0; i < a->rounds; i++) {
        if (sigsetjmp(env, 1) == 0) {
            volatile unsigned char *p = a->addr;
            (void)*p;
            atomic_fetch_add(&test_bad_calls, 1);  /* should not get here */
        }
    }
    test_jump = NULL;
    return NULL;
}

static _Atomic int reader_stop;

static void *sent_signal(void *unused)
{
    (void)unused;
    /* A SIGSEGV sent to a thread (si_code SI_TKILL) is not a fault at all:
     * it must reach the program's handler as sent. */
    pthread_kill(pthread_self(), SIGSEGV);
    return NULL;
}

static void check_foreign_faults(struct holes *h, const char *what)
{
    CHECK_EQ_INT(use_path("direct"), 0);
    atomic_store(&test_calls, 0);
    atomic_store(&test_bad_calls, 0);
    atomic_store(&test_mask_ok, 0);
    atomic_store(&expect_addr, (void *)h->unmapped);
    atomic_store(&expect_code, SEGV_MAPERR);

    /* The faulting thread runs while this thread (the "sampler") keeps
     * doing guarded reads that fault too. */
    struct faulter_arg a = { h->unmapped, 200 };
    pthread_t t;
    pthread_create(&t, NULL, faulter, &a);
    unsigned char buf[64];
    int reads = 0, read_errors = 0;
    for (;;) {
        if (ps_read(buf, (uintptr_t)h->prot_none, sizeof buf) != -1)
            read_errors++;
        reads++;
        if (atomic_load(&test_calls) >= a.rounds && reads > 1000)
            break;
        if (reads > 50000000)
            break;
    }
    pthread_join(t, NULL);
    CHECK_EQ_INT(read_errors, 0);
    CHECK_EQ_INT(atomic_load(&test_calls), a.rounds);
    CHECK_EQ_INT(atomic_load(&test_bad_calls), 0);
    CHECK_EQ_INT(atomic_load(&test_mask_ok), a.rounds);
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_DIRECT);

    atomic_store(&test_calls, 0);
    atomic_store(&expect_code, SI_TKILL);
    pthread_create(&t, NULL, sent_signal, NULL);
    pthread_join(t, NULL);
    CHECK_EQ_INT(atomic_load(&test_calls), 1);
    CHECK_EQ_INT(atomic_load(&test_bad_calls), 0);
    printf("foreign faults    %s %s\n", what, atomic_load(&test_bad_calls) == 0 ? "ok" : "FAILED");
}

/* ---- the program's view: what the kernel would have shown it ---- */

/*
 * Every action the program sets on SIGSEGV through the interposers (while
 * the library's handler stays in the kernel) must read back, as "old" and
 * on query, exactly as the same action set on SIGUSR2 reads back from the
 * kernel itself: handler, flags (unknown bits dropped, the C library's
 * SA_RESTORER added), restorer, mask (SIGKILL/SIGSTOP dropped).  And its
 * handler must run as the kernel would have run it: SA_RESETHAND, the mask
 * inside, the alternate stack or not.
 */
static _Atomic int view_calls;
static int view_inside[2];  /* [SIGSEGV, SIGUSR2]: 1 sig blocked, 2 SIGUSR1 blocked, 4 on alt stack */

static void view_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    sigset_t cur;
    stack_t ss;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    sigaltstack(NULL, &ss);
    view_inside[sig == SIGSEGV ? 0 : 1] = sigismember(&cur, sig) | 2 * sigismember(&cur, SIGUSR1) |
                                          ((ss.ss_flags & SS_ONSTACK) ? 4 : 0);
    atomic_fetch_add(&view_calls, 1);
}

static void view_plain_handler(int sig)
{
    view_handler(sig, NULL, NULL);
}

/* The kernel's flag (the same on x86-64 and aarch64), which glibc's
 * headers do not export. */
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* The same action, but for the signal's own bit in the mask (signal()
 * blocks the signal it is for: SIGSEGV on one side, SIGUSR2 on the
 * other). */
#ifdef __GLIBC__
#define LIBC_REPORTS_RESTORER 1
#define LIBC_SIGNAL_MASKS_ITSELF 1   /* glibc's signal(): BSD semantics */
#else
#define LIBC_REPORTS_RESTORER 0
#define LIBC_SIGNAL_MASKS_ITSELF 0   /* musl's signal(): SA_RESTART alone */
#endif

static int same_action(const struct sigaction *a, const struct sigaction *b)
{
    sigset_t ma = a->sa_mask, mb = b->sa_mask;
    sigdelset(&ma, SIGSEGV);
    sigdelset(&ma, SIGUSR2);
    sigdelset(&mb, SIGSEGV);
    sigdelset(&mb, SIGUSR2);
    /* The restorer means something only under SA_RESTORER (qemu-user
     * reports its own trampoline for actions without it), and only where
     * the C library reports it: musl's sigaction() leaves the caller's
     * sa_restorer as it was. */
    return a->sa_handler == b->sa_handler && a->sa_flags == b->sa_flags &&
           (!(a->sa_flags & SA_RESTORER) || !LIBC_REPORTS_RESTORER ||
            a->sa_restorer == b->sa_restorer) &&
           memcmp(&ma, &mb, 8) == 0 &&
           sigismember(&a->sa_mask, SIGSEGV) == sigismember(&b->sa_mask, SIGUSR2) &&
           sigismember(&a->sa_mask, SIGUSR2) == sigismember(&b->sa_mask, SIGSEGV);
}

static void show_action(const char *what, const struct sigaction *a)
{
    unsigned long m;
    memcpy(&m, &a->sa_mask, sizeof m);
    fprintf(stderr, "  %s: handler %p flags %#x restorer %p mask %#lx\n", what,
            (void *)a->sa_handler, (unsigned)a->sa_flags, (void *)a->sa_restorer, m);
}

/* Sets act on SIGSEGV (interposed) and SIGUSR2 (the kernel), compares. */
static void view_step(const char *what, const struct sigaction *act)
{
    struct sigaction o1, o2, q1, q2;
    memset(&o1, 0x5a, sizeof o1);
    memset(&o2, 0x5a, sizeof o2);
    CHECK_EQ_INT(sigaction(SIGSEGV, act, &o1), 0);
    CHECK_EQ_INT(ps_real_sigaction(SIGUSR2, act, &o2), 0);
    sigaction(SIGSEGV, NULL, &q1);
    ps_real_sigaction(SIGUSR2, NULL, &q2);
    if (!same_action(&o1, &o2) || !same_action(&q1, &q2)) {
        fprintf(stderr, "view differs from the kernel's after %s\n", what);
        show_action("old, view", &o1);
        show_action("old, kernel", &o2);
        show_action("now, view", &q1);
        show_action("now, kernel", &q2);
        check_failures++;
    }
    CHECK(ps_mem_handlers_installed());
}

static void view_fire(const char *what)
{
    view_inside[0] = view_inside[1] = -1;
    atomic_store(&view_calls, 0);
    raise(SIGSEGV);
    raise(SIGUSR2);
    CHECK_EQ_INT(atomic_load(&view_calls), 2);
    if (view_inside[0] != view_inside[1]) {
        fprintf(stderr, "%s: inside the handler %d through the library, %d from the kernel\n",
                what, view_inside[0], view_inside[1]);
        check_failures++;
    }
    struct sigaction q1, q2;
    sigaction(SIGSEGV, NULL, &q1);
    ps_real_sigaction(SIGUSR2, NULL, &q2);
    if (!same_action(&q1, &q2)) {
        fprintf(stderr, "view differs from the kernel's after delivery, %s\n", what);
        show_action("view", &q1);
        show_action("kernel", &q2);
        check_failures++;
    }
}

static int our_kernel_flags(int sig)
{
    struct sigaction cur;
    ps_real_sigaction(sig, NULL, &cur);
    return cur.sa_flags;
}

static void check_view(void)
{
    int fails_before = check_failures;
    CHECK_EQ_INT(use_path("direct"), 0);
    static char alt[64 * 1024];
    stack_t ss = { .ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0 }, old_ss;
    CHECK(sigaltstack(&ss, &old_ss) == 0);

    struct sigaction a;
    siginfo_action(&a, test_handler, 0);
    sigaction(SIGSEGV, &a, NULL);
    ps_real_sigaction(SIGUSR2, &a, NULL);

    memset(&a, 0, sizeof a);
    a.sa_sigaction = view_handler;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK | 0x100 /* no such flag */;
    sigfillset(&a.sa_mask);
    view_step("SA_SIGINFO|SA_ONSTACK, full mask", &a);
    CHECK(our_kernel_flags(SIGSEGV) & SA_ONSTACK);
    view_fire("SA_ONSTACK");
    CHECK_EQ_INT(view_inside[0], 1 | 2 | 4);

    /* The C library's signal(): the same through our signal() interposer. */
    sighandler_t r1 = signal(SIGSEGV, SIG_IGN), r2 = ps_real_signal(SIGUSR2, SIG_IGN);
    struct sigaction q1, q2;
    sigaction(SIGSEGV, NULL, &q1);
    ps_real_sigaction(SIGUSR2, NULL, &q2);
    a.sa_sigaction = view_handler;
    CHECK(r1 == r2 && r1 == a.sa_handler);
    CHECK(same_action(&q1, &q2) && sigismember(&q1.sa_mask, SIGSEGV) == LIBC_SIGNAL_MASKS_ITSELF);
    memset(&a, 0, sizeof a);
    a.sa_handler = view_plain_handler;
    a.sa_flags = SA_RESTART;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGUSR1);
    view_step("a plain handler, SA_RESTART, SIGUSR1 masked", &a);
    CHECK(!(our_kernel_flags(SIGSEGV) & SA_ONSTACK) && (our_kernel_flags(SIGSEGV) & SA_RESTART));
    view_fire("plain handler");
    CHECK_EQ_INT(view_inside[0], 1 | 2);

    memset(&a, 0, sizeof a);
    a.sa_handler = SIG_DFL;
    a.sa_flags = SA_NODEFER;
    sigemptyset(&a.sa_mask);
    view_step("SIG_DFL", &a);

    memset(&a, 0, sizeof a);
    a.sa_sigaction = view_handler;
    a.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&a.sa_mask);
    view_step("SA_RESETHAND", &a);
    view_fire("SA_RESETHAND");   /* the view reads SIG_DFL afterwards, flags kept */
    CHECK_EQ_INT(view_inside[0], 1);

    a.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigaddset(&a.sa_mask, SIGUSR1);
    view_step("SA_NODEFER|SA_ONSTACK", &a);
    view_fire("SA_NODEFER|SA_ONSTACK");
    CHECK_EQ_INT(view_inside[0], 2 | 4);
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_DIRECT);

    /* Back to the test's handler; off the alternate stack. */
    install_test_handler(SIGSEGV);
    signal(SIGUSR2, SIG_DFL);
    sigaltstack(&old_ss, NULL);
    printf("program view      %s\n", check_failures == fails_before ? "ok" : "FAILED");
}

/* ---- file descriptors the program closed and reused ---- */

static int foreign_fds[64], nforeign;  /* pipes that were there before us (meson's) */

/* Our descriptors of a kind: "pipe:", "/memfd:pysample" or "/proc/" (the
 * /proc/<pid>/mem behind /proc/self/mem). */
static int find_fds(const char *prefix, int *fds, int max)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL && n < max) {
        char path[300], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        int fd = atoi(e->d_name), known = fd < 3 || fd == dirfd(d);
        for (int i = 0; i < nforeign; i++)
            known |= foreign_fds[i] == fd;
        if (strncmp(target, prefix, strlen(prefix)) == 0 && !known)
            fds[n++] = fd;
    }
    if (d != NULL)
        closedir(d);
    return n;
}

static void check_fd_reuse(const char *method, const char *prefix, struct holes *h)
{
    if (use_path(method) != 0)
        return;
    int fds[4];
    int n = find_fds(prefix, fds, 4);
    CHECK(n >= 1);
    /* The program closes everything (os.closerange) and opens a file of its
     * own on the same numbers. */
    char tmpl[] = "/tmp/test_memread-victim-XXXXXX";
    int victim = mkstemp(tmpl);
    unlink(tmpl);
    for (int i = 0; i < n; i++) {
        close(fds[i]);
        dup2(victim, fds[i]);
    }
    unsigned char buf[80];
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->good, sizeof buf), 0);
    CHECK(memcmp(buf, h->good, sizeof buf) == 0);
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h->unmapped, sizeof buf), -1);
    struct stat st;
    CHECK(fstat(victim, &st) == 0 && st.st_size == 0);
    CHECK_EQ_INT(lseek(victim, 0, SEEK_CUR), 0);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    close(victim);
    printf("%-17s fd reuse ok\n", method);
}

/* ---- scenarios in a fresh process ---- */

static int scenario_pipe = -1;  /* where a scenario reports handler calls */

static void count_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    char c = 'x';
    if (write(scenario_pipe, &c, 1) < 0) {
        /* nothing to do */
    }
    (void)sig;
}

/* The program's handler in the race scenario: if one of our faults ever
 * reached it, returning would fault again forever, so it reports and ends
 * the process. */
static void race_handler(int sig, siginfo_t *si, void *uc)
{
    count_handler(sig, si, uc);
    _exit(91);
}

static struct sigaction loop_next;

/* A handler that chains to "the previous one", which here is the library's
 * own: together with the library chaining to it, a loop. */
static void loop_handler(int sig, siginfo_t *si, void *uc)
{
    count_handler(sig, si, uc);
    loop_next.sa_sigaction(sig, si, uc);
}

static void set_disposition(int sig, void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    ps_real_sigaction(sig, &sa, NULL);
}

static void *spin_reader(void *arg)
{
    unsigned char *bad = arg, buf[64];
    while (!atomic_load(&reader_stop))
        if (ps_read(buf, (uintptr_t)bad, sizeof buf) != -1)
            _exit(90);
    return NULL;
}

/* ---- handlers the program installs after the library (fresh process) ---- */

static sigjmp_buf scen_env;
static jmp_buf scen_plain_env;
static int scen_on_alt, scen_off_alt;
static char *alt_lo;
static size_t alt_size;
static struct sigaction scen_saved;

static void report(char c)
{
    if (write(scenario_pipe, &c, 1) < 0) {
        /* nothing to do */
    }
}

static int on_alt_stack(void)
{
    char here;
    uintptr_t a = (uintptr_t)&here;
    return alt_lo != NULL && a >= (uintptr_t)alt_lo && a < (uintptr_t)alt_lo + alt_size;
}

/* CUDA-like: the program expects faults of its own and jumps back. */
static void recover_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    if (on_alt_stack())
        scen_on_alt++;
    else
        scen_off_alt++;
    siglongjmp(scen_env, 1);
}

/* The same with longjmp, which leaves the mask as the delivery set it. */
static void plain_longjmp_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    longjmp(scen_plain_env, 1);
}

/* faulthandler: report, put back the handler it replaced, raise again. */
static void fh_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    report('f');
    if (!on_alt_stack())
        report('N');          /* makes the count wrong: the test fails */
    sigaction(sig, &scen_saved, NULL);
    raise(sig);
}

/* A crash reporter that calls the handler it replaced. */
static void chain_handler(int sig, siginfo_t *si, void *uc)
{
    report('c');
    if ((scen_saved.sa_flags & SA_SIGINFO) && scen_saved.sa_handler != SIG_DFL &&
        scen_saved.sa_handler != SIG_IGN)
        scen_saved.sa_sigaction(sig, si, uc);
    else
        report('?');
}

/* Installed before the library; chained to by chain_handler. */
static void before_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    report('b');
    siglongjmp(scen_env, 1);
}

static void reset_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    report('r');
    siglongjmp(scen_env, 1);
}

static int install_after(int sig, void (*h)(int, siginfo_t *, void *), int flags,
                         struct sigaction *old)
{
    struct sigaction sa;
    siginfo_action(&sa, h, flags);
    return sigaction(sig, &sa, old);   /* through the interposer */
}

/* A NULL-page read, through an opaque value so that the compiler does not
 * see a constant null dereference; 1 if a handler jumped back. */
static int fault_once(void)
{
    volatile uintptr_t a = 16;
    if (sigsetjmp(scen_env, 1) == 0) {
        (void)*(volatile int *)a;
        return 0;
    }
    return 1;
}

static void use_altstack(void)
{
    static char alt[64 * 1024];
    stack_t ss = { .ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0 };
    alt_lo = alt;
    alt_size = sizeof alt;
    sigaltstack(&ss, NULL);
}

static int sig_blocked(int sig)
{
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    return sigismember(&cur, sig);
}

/* Scenarios of handlers installed after the library, while another thread
 * keeps faulting in guarded reads.  0 when all went as without us. */
static int scenario_after(const char *name, unsigned char *bad)
{
    pthread_t t;
    volatile int rc = 0;   /* kept across the longjmp below */
    atomic_store(&reader_stop, 0);
    pthread_create(&t, NULL, spin_reader, bad);
    if (strcmp(name, "recover") == 0) {
        if (install_after(SIGSEGV, recover_handler, 0, NULL) != 0)
            rc = 100;
        for (int i = 0; i < 1000 && rc == 0; i++)
            if (!fault_once())
                rc = 101;
        if (rc == 0 && (scen_off_alt != 1000 || sig_blocked(SIGSEGV)))
            rc = 102;
        /* longjmp does not restore the mask: SIGSEGV stays blocked, as the
         * kernel's delivery left it. */
        install_after(SIGSEGV, plain_longjmp_handler, 0, NULL);
        if (rc == 0 && setjmp(scen_plain_env) == 0) {
            volatile uintptr_t a = 16;
            (void)*(volatile int *)a;
            rc = 103;
        }
        if (rc == 0 && !sig_blocked(SIGSEGV))
            rc = 104;
        sigset_t segv;
        sigemptyset(&segv);
        sigaddset(&segv, SIGSEGV);
        pthread_sigmask(SIG_UNBLOCK, &segv, NULL);
    } else if (strcmp(name, "onstack") == 0) {
        use_altstack();
        install_after(SIGSEGV, recover_handler, SA_ONSTACK, NULL);
        for (int i = 0; i < 300 && rc == 0; i++)
            if (!fault_once())
                rc = 110;
        if (rc == 0 && (scen_on_alt != 300 || scen_off_alt != 0))
            rc = 111;
        install_after(SIGSEGV, recover_handler, 0, NULL);
        for (int i = 0; i < 300 && rc == 0; i++)
            if (!fault_once())
                rc = 112;
        if (rc == 0 && (scen_on_alt != 300 || scen_off_alt != 300))
            rc = 113;
    } else if (strcmp(name, "chain") == 0) {
        if (install_after(SIGSEGV, chain_handler, 0, &scen_saved) != 0 ||
            scen_saved.sa_sigaction != before_handler)
            rc = 120;
        else if (!fault_once())
            rc = 121;
    } else if (strcmp(name, "after-ign-kill") == 0) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(SIGSEGV, &ign, NULL);
        kill(getpid(), SIGSEGV);
    } else if (strcmp(name, "resethand") == 0) {
        struct sigaction q;
        install_after(SIGSEGV, reset_handler, SA_RESETHAND, NULL);
        if (!fault_once())
            rc = 130;
        sigaction(SIGSEGV, NULL, &q);
        if (rc == 0 && (q.sa_handler != SIG_DFL ||
                        (q.sa_flags & (SA_RESETHAND | SA_SIGINFO)) != (SA_RESETHAND | SA_SIGINFO)))
            rc = 131;
    } else {
        rc = 99;
    }
    atomic_store(&reader_stop, 1);
    pthread_join(t, NULL);
    if (rc == 0 && ps_mem_mode() != PS_READ_DIRECT)
        rc = 140;
    return rc;
}

/* A handler put in front of ours by a raw rt_sigaction (no interposer sees
 * it), as Go's runtime does. */
static int raw_ignore(int sig)
{
    struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } k = {
        (void *)SIG_IGN, 0, NULL, 0 };
    return (int)syscall(SYS_rt_sigaction, sig, &k, NULL, 8);
}

/* The ownership check's schedule (faultview.c, ps_mem_tick): a raw install
 * is seen within PS_CHECK_TICKS (10) ticks however little time they take
 * (before, only once a millisecond had passed: 10 ticks in less than that
 * left it unseen), starting right after a check. */
static int raw_within_ticks(void)
{
    ps_mem_tick();                /* the first: a check */
    if (raw_ignore(SIGBUS) != 0)
        return 85;
    for (int i = 0; i < 10 && ps_mem_mode() == PS_READ_DIRECT; i++)
        ps_mem_tick();
    return ps_mem_mode() == PS_READ_SYSCALL ? 0 : 87;
}

static int scenario(const char *name)
{
    struct rlimit no_core = { 0, 0 };
    setrlimit(RLIMIT_CORE, &no_core);
    /* Start from the kernel's defaults whatever the environment (a
     * sanitizer runtime installs its own handlers). */
    set_disposition(SIGSEGV, SIG_DFL);
    set_disposition(SIGBUS, SIG_DFL);
    unsigned char *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char buf[64];

    if (strcmp(name, "ign-kill") == 0 || strcmp(name, "ign-fault") == 0)
        set_disposition(SIGSEGV, SIG_IGN);
    if (strcmp(name, "loop") == 0 || strcmp(name, "chain") == 0) {
        struct sigaction sa;
        siginfo_action(&sa, strcmp(name, "loop") == 0 ? loop_handler : before_handler,
                       SA_NODEFER);
        ps_real_sigaction(SIGSEGV, &sa, NULL);
    }
    if (ps_mem_init() != 0)
        return 80;
    ps_mem_enable_direct();
    if (ps_mem_mode() != PS_READ_DIRECT)
        return 81;
    if (ps_read(buf, (uintptr_t)bad, sizeof buf) != -1)
        return 82;

    /* Through an opaque value, so the compiler does not see a constant
     * null dereference. */
    volatile uintptr_t null_addr = 16;
    volatile int *null = (volatile int *)null_addr;
    if (strcmp(name, "dfl-fault") == 0 || strcmp(name, "ign-fault") == 0) {
        (void)*null;          /* must die of SIGSEGV right here */
        return 0;
    }
    if (strcmp(name, "dfl-kill") == 0) {
        kill(getpid(), SIGSEGV);
        return 0;             /* must not be reached */
    }
    if (strcmp(name, "ign-kill") == 0) {
        kill(getpid(), SIGSEGV);
        return ps_read(buf, (uintptr_t)bad, sizeof buf) == -1 ? 0 : 83;
    }
    if (strcmp(name, "loop") == 0) {
        ps_real_sigaction(SIGSEGV, NULL, &loop_next);  /* ours, in front */
        (void)*null;          /* must die of SIGSEGV, not loop forever */
        return 0;
    }
    if (strcmp(name, "signal") == 0) {
        /* Through our signal() interposer (glibc's does not call the
         * exported sigaction): into the view, ours stays in front. */
        if (signal(SIGBUS, SIG_IGN) != SIG_DFL || signal(SIGBUS, SIG_IGN) != SIG_IGN)
            return 84;
        kill(getpid(), SIGBUS);       /* ignored, as the program asked */
        return ps_mem_mode() == PS_READ_DIRECT && ps_mem_handlers_installed() ? 0 : 86;
    }
    if (strcmp(name, "fh-like") == 0) {
        /* faulthandler.enable() after the library, then a real crash. */
        use_altstack();
        install_after(SIGSEGV, fh_handler, SA_NODEFER | SA_ONSTACK, &scen_saved);
        (void)*null;          /* must die of SIGSEGV, after one report */
        return 0;
    }
    if (strcmp(name, "after-dfl-fault") == 0) {
        install_after(SIGSEGV, recover_handler, 0, NULL);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &dfl, NULL);
        (void)*null;          /* must die of SIGSEGV right here */
        return 0;
    }
    if (strcmp(name, "resethand") == 0) {
        int rc = scenario_after(name, bad);
        if (rc != 0)
            return rc;
        (void)*null;          /* reset to SIG_DFL: must die of SIGSEGV */
        return 0;
    }
    if (strcmp(name, "recover") == 0 || strcmp(name, "onstack") == 0 ||
        strcmp(name, "chain") == 0 || strcmp(name, "after-ign-kill") == 0)
        return scenario_after(name, bad);
    if (strcmp(name, "raw") == 0) {
        /* Bypasses every interposer: only the per-tick check can see it. */
        struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } k = {
            (void *)SIG_IGN, 0, NULL, 0 };
        if (syscall(SYS_rt_sigaction, SIGBUS, &k, NULL, 8) != 0)
            return 85;
        if (ps_mem_mode() != PS_READ_DIRECT)
            return 86;
        ps_mem_tick();
        if (ps_mem_mode() != PS_READ_SYSCALL)
            return 87;
        ps_mem_force_mode(PS_READ_DIRECT);
        if (ps_mem_mode() != PS_READ_SYSCALL)
            return 88;
        /* The signal is the kernel's again: the program sees what it set,
         * reads still fail cleanly, and SIGSEGV keeps its view. */
        struct sigaction q;
        if (sigaction(SIGBUS, NULL, &q) != 0 || q.sa_handler != SIG_IGN)
            return 92;
        if (ps_read(buf, (uintptr_t)bad, sizeof buf) != -1)
            return 93;
        return 0;
    }
    if (strcmp(name, "raw-ticks") == 0)
        return raw_within_ticks();
    if (strcmp(name, "race") == 0) {
        /* The program installs its handler while a guarded read of bad
         * memory is running on another thread, over and over: its handler
         * must never see one of our faults. */
        pthread_t t;
        pthread_create(&t, NULL, spin_reader, bad);
        struct timespec ts = { 0, (long)(getpid() % 7) * 100000 };
        nanosleep(&ts, NULL);
        struct sigaction sa;
        siginfo_action(&sa, race_handler, 0);
        sigaction(SIGSEGV, &sa, NULL);
        nanosleep(&ts, NULL);
        atomic_store(&reader_stop, 1);
        pthread_join(t, NULL);
        return ps_mem_mode() == PS_READ_DIRECT ? 0 : 89;
    }
    return 99;
}

/* Runs a scenario in a fresh process; returns its wait status and what it
 * wrote to the report pipe. */
static int run_scenario(const char *name, int *reports)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", p[1]);
        execl("/proc/self/exe", "test_memread", name, fd, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char b[256];
    ssize_t r;
    *reports = 0;
    while ((r = read(p[0], b, sizeof b)) > 0)
        *reports += (int)r;
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void check_scenarios(void)
{
    struct {
        const char *name;
        int sig;        /* expected death signal, or 0 for exit 0 */
        int min_reports, max_reports;  /* calls of the program's handlers */
    } s[] = {
        { "dfl-fault", SIGSEGV, 0, 0 }, { "dfl-kill", SIGSEGV, 0, 0 },
        { "ign-kill", 0, 0, 0 }, { "ign-fault", SIGSEGV, 0, 0 },
        { "loop", SIGSEGV, 1, 4 }, { "signal", 0, 0, 0 }, { "raw", 0, 0, 0 },
        { "raw-ticks", 0, 0, 0 },
        /* Handlers installed after the library (kept behind ours). */
        { "recover", 0, 0, 0 }, { "onstack", 0, 0, 0 }, { "chain", 0, 2, 2 },
        { "resethand", SIGSEGV, 1, 1 }, { "fh-like", SIGSEGV, 1, 1 },
        { "after-dfl-fault", SIGSEGV, 0, 0 }, { "after-ign-kill", 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        int reports;
        int st = run_scenario(s[i].name, &reports);
        int ok = s[i].sig ? (WIFSIGNALED(st) && WTERMSIG(st) == s[i].sig)
                          : (WIFEXITED(st) && WEXITSTATUS(st) == 0);
        ok = ok && reports >= s[i].min_reports && reports <= s[i].max_reports;
        if (!ok) {
            fprintf(stderr, "scenario %s: status %#x (signal %d, exit %d), %d handler calls\n",
                    s[i].name, st, WIFSIGNALED(st) ? WTERMSIG(st) : 0,
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1, reports);
            check_failures++;
        }
        printf("scenario %-15s %s\n", s[i].name, ok ? "ok" : "FAILED");
    }
    int races = 0, race_fail = 0;
    for (int i = 0; i < 30; i++, races++) {
        int reports;
        int st = run_scenario("race", &reports);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0 && reports == 0)) {
            fprintf(stderr, "race run %d: status %#x, %d calls of the program's handler\n",
                    i, st, reports);
            race_fail++;
        }
    }
    CHECK_EQ_INT(race_fail, 0);
    printf("scenario race     %d runs, %d failed\n", races, race_fail);
}

int main(int argc, char **argv)
{
    /* This test is the process whose state the library keeps, from the
     * start (the lifecycle claims it at set-up): the stand-ins act rather
     * than only forward, as in a vfork child. */
    ps_owner_claim();
    page = sysconf(_SC_PAGESIZE);
    if (argc == 3) {
        scenario_pipe = atoi(argv[2]);
        return scenario(argv[1]);
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    nforeign = find_fds("", foreign_fds, 64);

    /* The program had a handler of its own before the library came. */
    install_test_handler(SIGSEGV);
    install_test_handler(SIGBUS);

    CHECK_EQ_INT(ps_mem_init(), 0);
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_SYSCALL);   /* starts on the syscall path */
    ps_mem_enable_direct();
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_DIRECT);
    CHECK(ps_mem_handlers_installed());

    struct holes h;
    make_holes(&h);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (use_path(paths[i]) != 0) {
            printf("%-17s not available here, skipped\n", paths[i]);
            CHECK(strcmp(paths[i], "direct") != 0 && strcmp(paths[i], "pipe") != 0);
            continue;
        }
        check_path(paths[i], &h);
    }
    check_foreign_faults(&h, "(handler installed before the library)");
    check_fd_reuse("pipe", "pipe:", &h);
    check_fd_reuse("file", "/memfd:pysample", &h);
    check_fd_reuse("procmem", "/proc/", &h);

    /* The program installs handlers now (pytest's faulthandler, CUDA):
     * they go into its view, the library's handler stays in front, and
     * the direct path stays on, ticks included. */
    check_view();
    CHECK_EQ_INT(use_path("direct"), 0);
    install_test_handler(SIGSEGV);
    install_test_handler(SIGBUS);
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_DIRECT);
    ps_mem_tick();
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_DIRECT);
    CHECK(ps_mem_handlers_installed());
    check_foreign_faults(&h, "(handler installed after the library)");
    unsigned char buf[16];
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h.unmapped, sizeof buf), -1);
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h.trunc, sizeof buf), -1);   /* SIGBUS */
    CHECK_EQ_INT(ps_read(buf, (uintptr_t)h.good, sizeof buf), 0);
    CHECK_EQ_INT(atomic_load(&test_bad_calls), 0);
    printf("program handler   direct path kept\n");

    check_scenarios();
    CHECK_DONE();
}
