/*
 * faultprobe.c - a C library with SIGSEGV handling of its own, as CUDA, a
 * JIT or a crash reporter has, for stress_handlers.py (loaded via ctypes).
 *
 * Its handler is installed while libpysample's is in front, so it lives in
 * the program's view and must be called exactly as the kernel would have
 * called it: it checks the stack it runs on, the mask, SA_RESETHAND, and
 * recovers from its own faults with siglongjmp.  A fault it did not expect
 * (one of the profiler's own reads reaching it) ends the process with
 * status 3 and a message.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What stress_handlers.py calls. */
int fp_install(int onstack, int resethand);
int fp_altstack(void);
long fp_probe(int n);
int fp_is_default(void);
long fp_calls(void);
long fp_on_alt(void);
long fp_off_alt(void);
long fp_masked(void);

static __thread sigjmp_buf *jump;
static __thread char *alt_lo;
static __thread size_t alt_size;
static _Atomic long calls, on_alt, off_alt, masked;
static unsigned char *bad;

static void handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char here;
    sigset_t cur;
    atomic_fetch_add(&calls, 1);
    if (alt_lo != NULL && (uintptr_t)&here >= (uintptr_t)alt_lo &&
        (uintptr_t)&here < (uintptr_t)alt_lo + alt_size)
        atomic_fetch_add(&on_alt, 1);
    else
        atomic_fetch_add(&off_alt, 1);
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    if (sigismember(&cur, sig))
        atomic_fetch_add(&masked, 1);
    if (jump == NULL || si == NULL || si->si_addr != (void *)bad) {
        static const char msg[] = "faultprobe: a fault it did not cause reached its handler\n";
        if (write(2, msg, sizeof msg - 1) < 0) {
            /* exiting anyway */
        }
        _exit(3);
    }
    siglongjmp(*jump, 1);
}

/* Installs the handler (SA_ONSTACK, SA_RESETHAND on request); 0 or -1. */
int fp_install(int onstack, int resethand)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | (onstack ? SA_ONSTACK : 0) | (resethand ? SA_RESETHAND : 0);
    sigemptyset(&sa.sa_mask);
    if (bad == NULL) {
        void *m = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return -1;
        bad = m;
    }
    return sigaction(SIGSEGV, &sa, NULL);
}

/* An alternate signal stack for the calling thread. */
int fp_altstack(void)
{
    static char stack[64 * 1024];
    stack_t ss = { .ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0 };
    alt_lo = stack;
    alt_size = sizeof stack;
    return sigaltstack(&ss, NULL);
}

/* Faults n times on its own PROT_NONE page, recovering each time; returns
 * how many faults it recovered from (n when all went well). */
long fp_probe(int n)
{
    volatile long ok = 0;   /* kept across siglongjmp */
    for (volatile int i = 0; i < n; i++) {
        sigjmp_buf env;
        jump = &env;
        if (sigsetjmp(env, 1) == 0) {
            (void)*(volatile unsigned char *)bad;
            jump = NULL;
            return -1;   /* no fault: cannot be */
        }
        jump = NULL;
        ok++;
    }
    return ok;
}

/* 1 if SIGSEGV's handler reads back as SIG_DFL (after SA_RESETHAND). */
int fp_is_default(void)
{
    struct sigaction q;
    return sigaction(SIGSEGV, NULL, &q) == 0 && q.sa_handler == SIG_DFL;
}

long fp_calls(void) { return atomic_load(&calls); }
long fp_on_alt(void) { return atomic_load(&on_alt); }
long fp_off_alt(void) { return atomic_load(&off_alt); }
long fp_masked(void) { return atomic_load(&masked); }
