/*
 * test_sigview.c - which signal is whose (the table) and delivery to the
 * program's view as the kernel would have delivered (lib/platform/sigview.c).
 *
 * Each delivery rule has a test that fails when the rule is broken: the
 * handler records what it was called with (mask, errno, arguments), and the
 * test compares that with what the kernel would have given it.  Deliveries
 * are made from normal context with a getcontext() context standing for the
 * interrupted code's; the default action is tried in a fork child, which
 * must die of the signal (or not, for one the kernel ignores by default).
 * Last, the program's side through the library's own sigaction() and
 * signal() stand-ins (linked whole, as in the library): the table sends each
 * signal to its keeper, and a query returns what the program installed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"
#include "platform/platform.h"
#include "platform/sigview.h"
#include "platform/stacks.h"
#include "platform/linux/linux.h"
#include "util/owner.h"
#include "util/section.h"

/* What the last handler call saw. */
static struct {
    int calls;
    int sig;
    siginfo_t *si;
    void *uc;
    int errno_in;
    sigset_t mask;
    int recurse;            /* the loop test: deliver again from inside */
    struct ps_sigview *v;
} seen;

static int after_reset_calls;

static void record(int sig, siginfo_t *si, void *uc)
{
    seen.calls++;
    seen.sig = sig;
    seen.si = si;
    seen.uc = uc;
    seen.errno_in = errno;
    pthread_sigmask(SIG_BLOCK, NULL, &seen.mask);
    errno = 7;   /* what the interrupted code must see afterwards */
    if (seen.recurse > 0 && seen.recurse-- > 0)
        ps_sigview_deliver(seen.v, si, uc, 0, errno, NULL);
}

static void ours(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    seen.calls += 1000;
}

static void counted_reset(struct ps_sigview *v)
{
    (void)v;
    after_reset_calls++;
}

/* A view of sig whose action is a handler (record) with flags and sa_mask
 * {mask_sig} (0: empty). */
static void view_with(struct ps_sigview *v, int sig, void (*h)(int, siginfo_t *, void *),
                      int flags, int mask_sig)
{
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = h;
    a.sa_flags = flags;
    sigemptyset(&a.sa_mask);
    if (mask_sig)
        sigaddset(&a.sa_mask, mask_sig);
    ps_sigview_init(v, sig, ours, &a);
    ps_sigview_set(v, &a, NULL);   /* in the kernel's form */
}

/* Delivers v's signal with an interrupted context whose mask is {SIGUSR1};
 * the thread's mask is put back afterwards (sigreturn's job in a handler). */
static enum ps_sigview_outcome deliver_from_usr1_blocked(struct ps_sigview *v, int from_fault,
                                                         int saved_errno)
{
    static siginfo_t si;
    static ucontext_t uc;
    sigset_t before;
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    getcontext(&uc);
    sigemptyset(&uc.uc_sigmask);
    sigaddset(&uc.uc_sigmask, SIGUSR1);
    memset(&seen, 0, sizeof seen);
    si.si_signo = v->sig;
    enum ps_sigview_outcome o = ps_sigview_deliver(v, &si, &uc, from_fault, saved_errno,
                                                   counted_reset);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    return o;
}

static void test_table(void)
{
    static const struct { int sig; enum ps_sig_owner owner; enum ps_sig_keeper keeper; } want[] = {
        { SIGSEGV, PS_SIG_SHARED, PS_SIGKEEP_FAULT },   { SIGBUS, PS_SIG_SHARED, PS_SIGKEEP_FAULT },
        { SIGURG, PS_SIG_LIBRARY, PS_SIGKEEP_NATIVE },  { SIGTERM, PS_SIG_WATCHED, PS_SIGKEEP_FATAL },
        { SIGHUP, PS_SIG_WATCHED, PS_SIGKEEP_FATAL },   { SIGQUIT, PS_SIG_WATCHED, PS_SIGKEEP_FATAL },
        { SIGINT, PS_SIG_WATCHED, PS_SIGKEEP_FATAL },   { SIGUSR1, PS_SIG_PROGRAM, PS_SIGKEEP_NONE },
        { SIGCHLD, PS_SIG_PROGRAM, PS_SIGKEEP_NONE },   { SIGPROF, PS_SIG_PROGRAM, PS_SIGKEEP_NONE },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct ps_sig_role *r = ps_sig_role(want[i].sig);
        CHECK_EQ_INT(r->owner, want[i].owner);
        CHECK_EQ_INT(r->keeper, want[i].keeper);
        CHECK(r->what != NULL && r->what[0] != '\0');
    }
    /* One row per signal, and every row kept by someone. */
    int n;
    const struct ps_sig_role *rows = ps_sig_roles(&n);
    CHECK_EQ_INT(n, 7);
    for (int i = 0; i < n; i++) {
        CHECK(rows[i].keeper != PS_SIGKEEP_NONE && rows[i].owner != PS_SIG_PROGRAM);
        for (int j = i + 1; j < n; j++)
            CHECK(rows[i].sig != rows[j].sig);
    }
    CHECK(ps_sig_default_ignores(SIGURG) && !ps_sig_default_ignores(SIGTERM));
}

/* The view answers as the kernel would: compared with the kernel's own
 * answer for the same action on a signal nobody uses here. */
static void test_view_reads_as_kernel(void)
{
    struct sigaction a, k, got, prev, alias;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = record;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGWINCH);
    sigaddset(&a.sa_mask, SIGKILL);   /* the kernel never keeps it */
    /* What the C library adds to every action (as faultview's attach does). */
    CHECK_EQ_INT(ps_real_sigaction(SIGUSR2, &a, NULL), 0);
    CHECK_EQ_INT(ps_real_sigaction(SIGUSR2, NULL, &k), 0);
    ps_sigaction_learn(&k, a.sa_flags);

    struct ps_sigview v;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    ps_sigview_init(&v, SIGUSR2, ours, &dfl);
    ps_sigview_set(&v, &a, &prev);
    CHECK(prev.sa_handler == SIG_DFL);
    ps_sigview_get(&v, &got);
    CHECK(got.sa_sigaction == k.sa_sigaction);
    CHECK_EQ_INT(got.sa_flags, k.sa_flags);
    /* qemu-user emulates sigaction and keeps SIGKILL and SIGSTOP in a mask,
     * where Linux drops them: under it (scripts/cross-arm64 says so) the
     * mask would be checked against qemu, not a kernel. */
    if (getenv("PYSAMPLE_TEST_UNDER_QEMU") == NULL)
        for (int s = 1; s < 64; s++)
            CHECK_EQ_INT(sigismember(&got.sa_mask, s), sigismember(&k.sa_mask, s));
    /* act and old may be one struct: old is the previous, act is taken. */
    alias = dfl;
    ps_sigview_set(&v, &alias, &alias);
    CHECK(alias.sa_sigaction == record);
    ps_sigview_get(&v, &got);
    CHECK(got.sa_handler == SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
}

/* The handler's mask: the interrupted code's, plus sa_mask, plus the signal. */
static void test_mask_during_handler(void)
{
    struct ps_sigview v;
    view_with(&v, SIGUSR2, record, SA_SIGINFO, SIGWINCH);
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_RAN);
    CHECK_EQ_INT(seen.calls, 1);
    CHECK_EQ_INT(sigismember(&seen.mask, SIGUSR1), 1);    /* the interrupted code's */
    CHECK_EQ_INT(sigismember(&seen.mask, SIGWINCH), 1);   /* sa_mask */
    CHECK_EQ_INT(sigismember(&seen.mask, SIGUSR2), 1);    /* itself */
    CHECK_EQ_INT(sigismember(&seen.mask, SIGTTIN), 0);    /* nothing else */

    /* SA_NODEFER: not itself; the rest as before. */
    view_with(&v, SIGUSR2, record, SA_SIGINFO | SA_NODEFER, SIGWINCH);
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_RAN);
    CHECK_EQ_INT(sigismember(&seen.mask, SIGUSR2), 0);
    CHECK_EQ_INT(sigismember(&seen.mask, SIGWINCH), 1);
    CHECK_EQ_INT(sigismember(&seen.mask, SIGUSR1), 1);
}

/* The kernel's arguments (a one-parameter handler ignores them), errno. */
static void test_arguments_and_errno(void)
{
    struct ps_sigview v;
    view_with(&v, SIGUSR2, record, 0, 0);   /* no SA_SIGINFO: still three */
    errno = 0;
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 42), PS_SIGVIEW_RAN);
    CHECK_EQ_INT(seen.sig, SIGUSR2);
    CHECK(seen.si != NULL && seen.si->si_signo == SIGUSR2);
    CHECK(seen.uc != NULL);
    CHECK_EQ_INT(seen.errno_in, 42);   /* the interrupted code's */
    CHECK_EQ_INT(errno, 7);            /* as the handler left it */
}

/* SA_RESETHAND: SIG_DFL before the handler runs, flags and mask kept. */
static void test_resethand(void)
{
    struct ps_sigview v;
    struct sigaction got;
    view_with(&v, SIGUSR2, record, SA_SIGINFO | SA_RESETHAND | SA_ONSTACK, SIGWINCH);
    after_reset_calls = 0;
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_RAN);
    CHECK_EQ_INT(seen.calls, 1);
    CHECK_EQ_INT(after_reset_calls, 1);
    ps_sigview_get(&v, &got);
    CHECK(got.sa_handler == SIG_DFL);
    CHECK((got.sa_flags & (SA_RESETHAND | SA_ONSTACK)) == (SA_RESETHAND | SA_ONSTACK));
    CHECK_EQ_INT(sigismember(&got.sa_mask, SIGWINCH), 1);
    /* The next one takes the default action. */
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_DEFAULT);
    CHECK_EQ_INT(seen.calls, 0);

    /* Without it the handler stays. */
    view_with(&v, SIGUSR2, record, SA_SIGINFO, 0);
    after_reset_calls = 0;
    deliver_from_usr1_blocked(&v, 0, 0);
    ps_sigview_get(&v, &got);
    CHECK(got.sa_sigaction == record);
    CHECK_EQ_INT(after_reset_calls, 0);
}

/* SIG_IGN drops a sent signal, not a fault; SIG_DFL and a view naming our
 * own handler take the default action; no handler runs for any. */
static void test_ignore_and_default(void)
{
    struct ps_sigview v;
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = SIG_IGN;
    ps_sigview_init(&v, SIGUSR2, ours, &a);
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_IGNORED);
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 1, 0), PS_SIGVIEW_DEFAULT);
    a.sa_handler = SIG_DFL;
    ps_sigview_init(&v, SIGUSR2, ours, &a);
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_DEFAULT);
    view_with(&v, SIGUSR2, ours, SA_SIGINFO, 0);
    CHECK_EQ_INT(deliver_from_usr1_blocked(&v, 0, 0), PS_SIGVIEW_DEFAULT);
    CHECK_EQ_INT(seen.calls, 0);
}

/* A handler that chains back to us: cut after PS_CHAIN_MAX_NEST nestings
 * (the handler would otherwise recurse 50 deep). */
static void test_loop_guard(void)
{
    struct ps_sigview v;
    view_with(&v, SIGUSR2, record, SA_SIGINFO | SA_NODEFER, 0);
    static siginfo_t si;
    static ucontext_t uc;
    getcontext(&uc);
    memset(&seen, 0, sizeof seen);
    seen.recurse = 50;
    seen.v = &v;
    CHECK_EQ_INT(ps_sigview_deliver(&v, &si, &uc, 0, 0, NULL), PS_SIGVIEW_RAN);
    CHECK_EQ_INT(seen.calls, 3);
    /* The guard is released: the next delivery runs the handler again. */
    seen.calls = 0;
    seen.recurse = 0;
    CHECK_EQ_INT(ps_sigview_deliver(&v, &si, &uc, 0, 0, NULL), PS_SIGVIEW_RAN);
    CHECK_EQ_INT(seen.calls, 1);
}

/* The default action in a child, with our handler installed first: the
 * child's status (if it returned: 0 with SIG_DFL installed, 4 with ours
 * still in). */
static int child_default(int sig, int from_fault, int block_first)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct ps_sigview v;
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_handler = SIG_DFL;
        ps_sigview_init(&v, sig, ours, &a);
        /* Our handler in front, as in the library. */
        struct sigaction o;
        memset(&o, 0, sizeof o);
        o.sa_sigaction = ours;
        o.sa_flags = SA_SIGINFO;
        ps_real_sigaction(sig, &o, NULL);
        if (block_first) {   /* as our handler's sa_mask blocks it */
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, sig);
            pthread_sigmask(SIG_BLOCK, &set, NULL);
        }
        ps_sigview_default(&v, from_fault);
        struct sigaction k;
        ps_real_sigaction(sig, NULL, &k);
        _exit(k.sa_handler == SIG_DFL ? 0 : k.sa_sigaction == ours ? 4 : 3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void test_default_action(void)
{
    int st = child_default(SIGTERM, 0, 1);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    st = child_default(SIGHUP, 0, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGHUP);
    /* Ignored by default: nothing happens, ours stays in. */
    st = child_default(SIGURG, 0, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 4);
    /* A fault: SIG_DFL back, not re-sent (the instruction faults again). */
    st = child_default(SIGSEGV, 1, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    st = child_default(SIGSEGV, 0, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

/* ---- through the stand-ins ------------------------------------------------- */

static void noop_write(int sig)
{
    (void)sig;
}

static void program_handler(int sig)
{
    (void)sig;
}

/* The kernel's handler for sig (what the program does not see). */
static void (*kernel_handler(int sig))(int)
{
    struct sigaction k;
    ps_real_sigaction(sig, NULL, &k);
    return k.sa_handler;
}

/* SIGTERM (a PS_SIGKEEP_FATAL row): ours in the kernel while the program
 * has it at default, and the program sees the default it set. */
static void test_stand_ins_fatal(void)
{
    ps_fatal_signals_take_over(noop_write);
    struct sigaction a, q;
    CHECK(kernel_handler(SIGTERM) != SIG_DFL);
    CHECK_EQ_INT(sigaction(SIGTERM, NULL, &q), 0);
    CHECK(q.sa_handler == SIG_DFL);
    memset(&a, 0, sizeof a);
    a.sa_handler = SIG_DFL;
    a.sa_flags = SA_RESTART;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGUSR1);
    CHECK_EQ_INT(sigaction(SIGTERM, &a, NULL), 0);
    CHECK_EQ_INT(sigaction(SIGTERM, NULL, &q), 0);
    CHECK(q.sa_handler == SIG_DFL && (q.sa_flags & SA_RESTART));
    CHECK_EQ_INT(sigismember(&q.sa_mask, SIGUSR1), 1);
    CHECK(kernel_handler(SIGTERM) != SIG_DFL);
    /* A handler replaces ours at once; SIG_DFL puts ours back. */
    CHECK(signal(SIGTERM, program_handler) == SIG_DFL);
    CHECK(kernel_handler(SIGTERM) == program_handler);
    CHECK(signal(SIGTERM, SIG_DFL) == program_handler);
    CHECK(kernel_handler(SIGTERM) != SIG_DFL && kernel_handler(SIGTERM) != program_handler);
    CHECK_EQ_INT(sigaction(SIGTERM, NULL, &q), 0);
    CHECK(q.sa_handler == SIG_DFL);
    /* The program's own signal: straight to the kernel. */
    CHECK(signal(SIGUSR1, program_handler) == SIG_DFL);
    CHECK(kernel_handler(SIGUSR1) == program_handler);
    signal(SIGUSR1, SIG_DFL);
}

sighandler_t bsd_signal(int sig, sighandler_t handler);
#if defined(__GLIBC__)
sighandler_t sysv_signal(int sig, sighandler_t handler);
sighandler_t __sysv_signal(int sig, sighandler_t handler);
#endif

static int blocked_now(int sig)
{
    sigset_t m;
    pthread_sigmask(SIG_BLOCK, NULL, &m);
    return sigismember(&m, sig);
}

/* The C library's other calls that set a plain handler call its internal
 * sigaction, not ours: each has a stand-in that asks SIGTERM's keeper
 * (fatal.c) as signal() does, so the program is answered what it set and
 * ours comes back with the default.  Without them the first answer is
 * our handler and SIG_DFL takes ours out of the kernel. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  /* sigset, sigignore: what we test */
static void test_stand_ins_other_setters(void)
{
    void (*ours_term)(int) = kernel_handler(SIGTERM);
    struct sigaction q;
#if defined(__GLIBC__)
    /* System V semantics: reset on delivery, not blocked while it runs. */
    CHECK(sysv_signal(SIGTERM, program_handler) == SIG_DFL);
    CHECK(kernel_handler(SIGTERM) == program_handler);
    CHECK_EQ_INT(sigaction(SIGTERM, NULL, &q), 0);
    CHECK((q.sa_flags & (SA_RESETHAND | SA_NODEFER)) == (SA_RESETHAND | SA_NODEFER));
    CHECK(__sysv_signal(SIGTERM, SIG_DFL) == program_handler);
    CHECK(kernel_handler(SIGTERM) == ours_term);
    CHECK(ssignal(SIGTERM, program_handler) == SIG_DFL);
    CHECK(ssignal(SIGTERM, SIG_DFL) == program_handler);
    CHECK(kernel_handler(SIGTERM) == ours_term);
#endif
    CHECK(bsd_signal(SIGTERM, program_handler) == SIG_DFL);
    CHECK_EQ_INT(sigaction(SIGTERM, NULL, &q), 0);
    CHECK(q.sa_flags & SA_RESTART);
    CHECK_EQ_INT(sigignore(SIGTERM), 0);
    CHECK(kernel_handler(SIGTERM) == SIG_IGN);
    CHECK(sigset(SIGTERM, SIG_DFL) == SIG_IGN);
    CHECK(kernel_handler(SIGTERM) == ours_term);
    /* SIG_HOLD blocks it and answers the handler the program set; the
     * next sigset unblocks it and answers SIG_HOLD. */
    CHECK(sigset(SIGTERM, SIG_HOLD) == SIG_DFL);
    CHECK_EQ_INT(blocked_now(SIGTERM), 1);
    CHECK(sigset(SIGTERM, SIG_HOLD) == SIG_HOLD);
    CHECK(sigset(SIGTERM, program_handler) == SIG_HOLD);
    CHECK_EQ_INT(blocked_now(SIGTERM), 0);
    CHECK(kernel_handler(SIGTERM) == program_handler);
    CHECK(sigset(SIGTERM, SIG_DFL) == program_handler);
    CHECK(kernel_handler(SIGTERM) == ours_term);
    CHECK_EQ_INT(sigaction(SIGTERM, NULL, &q), 0);
    CHECK(q.sa_handler == SIG_DFL);
    /* The program's own signal: straight to the C library. */
    CHECK(sigset(SIGUSR1, program_handler) == SIG_DFL);
    CHECK(kernel_handler(SIGUSR1) == program_handler);
    CHECK(sigset(SIGUSR1, SIG_DFL) == program_handler);
}
#pragma GCC diagnostic pop

static int urg_calls;
static sigset_t urg_mask;

static void urg_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    urg_calls++;
    pthread_sigmask(SIG_BLOCK, NULL, &urg_mask);
}

/* SIGURG (the PS_SIGKEEP_NATIVE row) once native stacks installed ours: the
 * program's handler goes into the view, and one SIGURG that is not a
 * request of ours reaches it as the kernel would have delivered it. */
static void test_stand_ins_native(void)
{
    char why[256];
    if (ps_native_platform_init(why, sizeof why) != 0) {
        fprintf(stderr, "native stacks refused here (%s): SIGURG not tried\n", why);
        return;
    }
    void (*ours_urg)(int) = kernel_handler(SIGURG);
    struct sigaction a, q;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = urg_handler;
    a.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGWINCH);
    CHECK_EQ_INT(sigaction(SIGURG, &a, &q), 0);
    CHECK(q.sa_handler == SIG_DFL);
    CHECK(kernel_handler(SIGURG) == ours_urg && ours_urg != SIG_DFL);
    CHECK_EQ_INT(sigaction(SIGURG, NULL, &q), 0);
    CHECK(q.sa_sigaction == urg_handler && (q.sa_flags & SA_RESETHAND));
    raise(SIGURG);
    CHECK_EQ_INT(urg_calls, 1);
    CHECK_EQ_INT(sigismember(&urg_mask, SIGURG), 1);
    CHECK_EQ_INT(sigismember(&urg_mask, SIGWINCH), 1);
    /* Reset, flags and mask kept; the next one is ignored (SIGURG's default). */
    CHECK_EQ_INT(sigaction(SIGURG, NULL, &q), 0);
    CHECK(q.sa_handler == SIG_DFL && (q.sa_flags & SA_RESETHAND));
    CHECK_EQ_INT(sigismember(&q.sa_mask, SIGWINCH), 1);
    raise(SIGURG);
    CHECK_EQ_INT(urg_calls, 1);
    CHECK(signal(SIGURG, SIG_IGN) == SIG_DFL);
    CHECK(kernel_handler(SIGURG) == ours_urg);
}

/*
 * sighold() and sigrelse() change the mask through the C library's own
 * sigprocmask (glibc's, checked: not through the symbol ours stands in
 * for), so they have stand-ins: what sigmask.c remembers of a thread that
 * took SIGURG is read again once it held it.  The same `now` throughout,
 * so that the memory's time limit cannot be what makes it read again; a
 * raw rt_sigprocmask, which nothing sees, shows that the memory would
 * otherwise answer with what it remembered.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  /* sighold, sigrelse: what we test */
static void test_stand_ins_mask(void)
{
    long tid = (long)syscall(SYS_gettid);
    sigset_t urg;
    sigemptyset(&urg);
    sigaddset(&urg, SIGURG);
    CHECK_EQ_INT(pthread_sigmask(SIG_UNBLOCK, &urg, NULL), 0);
    uint64_t now = ps_now_ns();
    CHECK_EQ_INT(ps_thread_blocks_signal(tid, SIGURG, now), 0);   /* read, kept */
    CHECK_EQ_INT(sighold(SIGURG), 0);
    CHECK_EQ_INT(ps_thread_blocks_signal(tid, SIGURG, now), 1);
    CHECK_EQ_INT(sigrelse(SIGURG), 0);
    CHECK_EQ_INT(ps_thread_blocks_signal(tid, SIGURG, now), 0);
    CHECK_EQ_INT(sighold(NSIG + 1), -1);                              /* as the C library */
    /* The control: a change nothing sees is answered from memory. */
    uint64_t raw = 1ull << (SIGURG - 1);
    CHECK_EQ_INT(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &raw, NULL, sizeof raw), 0);
    CHECK_EQ_INT(ps_thread_blocks_signal(tid, SIGURG, now), 0);
    CHECK_EQ_INT(syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &raw, NULL, sizeof raw), 0);
}
#pragma GCC diagnostic pop

/* The library's own critical sections change the mask with the C library's
 * pthread_sigmask: they do not make the sampler read every thread's mask
 * again (once per pysample_status() call, lifecycle step and fork, before
 * section.c bypassed our stand-in).  A change nothing sees (raw) is the
 * witness: it is still answered from memory after a section. */
static void test_section_is_not_a_mask_change(void)
{
    long tid = (long)syscall(SYS_gettid);
    sigset_t urg, before, after;
    sigemptyset(&urg);
    sigaddset(&urg, SIGURG);
    CHECK_EQ_INT(pthread_sigmask(SIG_UNBLOCK, &urg, NULL), 0);
    uint64_t now = ps_now_ns();
    CHECK_EQ_INT(ps_thread_blocks_signal(tid, SIGURG, now), 0);   /* read, kept */
    uint64_t raw = 1ull << (SIGURG - 1);
    CHECK_EQ_INT(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &raw, NULL, sizeof raw), 0);
    CHECK_EQ_INT(pthread_sigmask(SIG_BLOCK, NULL, &before), 0);
    struct ps_section sec;
    ps_section_enter(&sec, NULL);
    sigset_t inside;
    CHECK_EQ_INT(pthread_sigmask(SIG_BLOCK, NULL, &inside), 0);
    CHECK_EQ_INT(sigismember(&inside, SIGTERM), 1);                /* still a section */
    ps_section_leave(&sec);
    CHECK_EQ_INT(pthread_sigmask(SIG_BLOCK, NULL, &after), 0);
    for (int sig = 1; sig < NSIG; sig++)                            /* restored */
        CHECK_EQ_INT(sigismember(&after, sig), sigismember(&before, sig));
    CHECK_EQ_INT(ps_thread_blocks_signal(tid, SIGURG, now), 0);   /* no re-read */
    CHECK_EQ_INT(syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &raw, NULL, sizeof raw), 0);
}

int main(void)
{
    ps_interpose_init();
    test_table();
    test_view_reads_as_kernel();
    test_mask_during_handler();
    test_arguments_and_errno();
    test_resethand();
    test_ignore_and_default();
    test_loop_guard();
    test_default_action();
    ps_owner_claim();
    test_stand_ins_fatal();
    test_stand_ins_other_setters();
    test_stand_ins_native();
    test_stand_ins_mask();
    test_section_is_not_a_mask_change();
    CHECK_DONE();
}
