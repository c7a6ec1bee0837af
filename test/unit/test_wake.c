/* Unit test: the sampler's wait (state.c's nap on platform.h's ps_wake,
 * Linux: linux/wake.c).  A wake is never lost, from a signal handler on the
 * waiter's own thread between its look at the flags and its wait too (the
 * condition variable's trylock lost it: the nap ran to its deadline); the
 * nap ends when sampling is switched on while idle; and a nap is one
 * system call (the condition variable's was two: glibc's unlock after a
 * timed wait always made a FUTEX_WAKE).  Linked with
 * -Wl,--wrap=ps_wake_wait_until (test/meson.build): the wrapper below is
 * where "between the look and the wait" is. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"
#include "platform/platform.h"
#include "sampler/state.h"

#define MS 1000000ull

/* ---- a wake sent between the look and the wait ------------------------------- */

int __real_ps_wake_wait_until(struct ps_wake *w, uint32_t seen, uint64_t deadline);
int __wrap_ps_wake_wait_until(struct ps_wake *w, uint32_t seen, uint64_t deadline);

static volatile sig_atomic_t signal_before_wait;

int __wrap_ps_wake_wait_until(struct ps_wake *w, uint32_t seen, uint64_t deadline)
{
    if (signal_before_wait) {
        signal_before_wait = 0;
        raise(SIGUSR1);  /* the handler runs before raise() returns */
    }
    return __real_ps_wake_wait_until(w, seen, deadline);
}

static void ask_write(int sig)
{
    (void)sig;
    ps_sampler_request_write();
}

static void wake_from_handler_not_lost(void)
{
    struct sigaction sa = { .sa_handler = ask_write };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    signal_before_wait = 1;
    uint64_t t0 = ps_now_ns();
    ps_sampler_nap(t0 + 6000 * MS);
    uint64_t took = ps_now_ns() - t0;
    if (took >= 3000 * MS)
        fprintf(stderr, "nap with a write asked from a handler took %llu ms\n",
                (unsigned long long)(took / MS));
    CHECK(took < 3000 * MS);
    CHECK_EQ_INT(ps_sampler_take_write_request(), 1);
    CHECK_EQ_INT(signal_before_wait, 0);
}

/* ---- sampling switched on while idle ------------------------------------------- */

static void *switch_on_later(void *arg)
{
    (void)arg;
    usleep(20000);  /* the nap is most likely waiting by now; either way it must end */
    ps_sampler_set_active(1);
    return NULL;
}

static void nap_ends_when_switched_on(void)
{
    CHECK_EQ_INT(ps_sampler_move(PS_SAMPLER_OFF, PS_SAMPLER_WAITING), 0);
    CHECK_EQ_INT(ps_sampler_move(PS_SAMPLER_WAITING, PS_SAMPLER_IDLE), 0);
    ps_sampler_set_active(0);
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, switch_on_later, NULL), 0);
    uint64_t t0 = ps_now_ns();
    ps_sampler_nap(t0 + 6000 * MS);
    uint64_t took = ps_now_ns() - t0;
    pthread_join(t, NULL);
    CHECK(took < 3000 * MS);
    CHECK_EQ_INT(ps_sampler_active(), 1);
    /* IDLE and asked to sample: a nap ends at once, however often. */
    for (int k = 0; k < 3; k++) {
        t0 = ps_now_ns();
        ps_sampler_nap(t0 + 6000 * MS);
        CHECK(ps_now_ns() - t0 < 3000 * MS);
    }
    ps_sampler_move(PS_SAMPLER_IDLE, PS_SAMPLER_ENDED);
    ps_sampler_move(PS_SAMPLER_ENDED, PS_SAMPLER_OFF);
    ps_sampler_set_active(0);
}

/* ---- system calls a nap -------------------------------------------------------- */

#define NAPS 50

/* Counted by the SIGSYS handler: the futex waits (made to time out at
 * once: the handler returns -ETIMEDOUT) and every other futex call. */
static volatile sig_atomic_t waits, others;

#define DATA_WAIT 1
#define DATA_OTHER 2

static void on_sigsys(int sig, siginfo_t *si, void *uc_)
{
    (void)sig;
    ucontext_t *uc = uc_;
    if (si->si_errno != DATA_WAIT) {
        others++;
        return;  /* skipped; its return value is the call's number, which no caller reads */
    }
    waits++;
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_RAX] = -ETIMEDOUT;
#elif defined(__aarch64__)
    uc->uc_mcontext.regs[0] = (unsigned long long)-ETIMEDOUT;
#endif
}

/* futex(2) with a wait operation (FUTEX_WAIT 0, FUTEX_WAIT_BITSET 9,
 * whatever the private and clock flags): trapped with DATA_WAIT; any
 * other futex call: DATA_OTHER; the rest runs. */
static int trap_futex(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_futex, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x7f),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 9, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP | DATA_OTHER),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP | DATA_WAIT),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* In a child of one thread (nothing else takes a lock there): NAPS naps,
 * each ending at its (trapped) wait's timeout.  Exit status: 0, or bit 0
 * if the waits were not one a nap, bit 1 if other futex calls were made;
 * 255 when seccomp is not available. */
static void count_in_child(void)
{
    struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSYS, &sa, NULL);
    if (trap_futex() != 0)
        _exit(255);
    for (int k = 0; k < NAPS; k++)
        ps_sampler_nap(ps_now_ns() + 1000 * MS);
    int w = waits, o = others;
    _exit((w != NAPS) | (o != 0) << 1);
}

static int nap_is_one_system_call(void)
{
    pid_t pid = fork();
    if (pid == 0)
        count_in_child();
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 255)
        return 77;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "naps: %s%s(status %#x)\n",
                WIFEXITED(status) && (WEXITSTATUS(status) & 1) ? "not one futex wait each " : "",
                WIFEXITED(status) && (WEXITSTATUS(status) & 2) ? "other futex calls " : "", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return 0;
}

int main(void)
{
    /* What the sampler's set-up does to the wait (ps_sampler_state_setup
     * needs an interpreter's layout). */
    ps_sampler_state_child_after_fork(0);
    wake_from_handler_not_lost();
    nap_ends_when_switched_on();
#if defined(__x86_64__) || defined(__aarch64__)
    if (nap_is_one_system_call() == 77)
        fprintf(stderr, "seccomp not available: the system call count is not checked\n");
#endif
    CHECK_DONE();
}
