/*
 * slowreap.c - runs a program with every thread it makes traced, and
 * reaps each thread that ends only DELAY_MS after it ended.
 *
 *     slowreap DELAY_MS PROGRAM [ARG...]
 *
 * For the process suite's fork-warning scenario (test_process.py,
 * test_fork_warning_after_a_slow_reap).  A thread that exits wakes its
 * pthread_join() when the kernel clears its tid (CLONE_CHILD_CLEARTID, in
 * exit_mm), but it leaves the process's thread count (field 20 of
 * /proc/self/stat) and /proc/self/task only when it is released.  Untraced,
 * that comes microseconds later; traced, the thread stays a zombie until
 * its tracer waits for it.  So here the gap between "joined" and "no longer
 * counted" is DELAY_MS every time, not a rare race.
 *
 * The program is traced from its exec (PTRACE_TRACEME) and every thread it
 * clones after that with it (PTRACE_O_TRACECLONE); processes it forks are
 * not traced.  Signals are passed on as they come.  Ends with the
 * program's status (its signal: 128 + the number); a line prefixed
 * "slowreap:" on stderr and status 125 if tracing is not permitted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEEN 4096

static pid_t seen[MAX_SEEN];
static size_t nseen;

/* 1 the first time tid stops: a cloned thread's first stop is the
 * SIGSTOP of its auto-attach, not a signal to pass on. */
static int first_stop(pid_t tid)
{
    for (size_t i = 0; i < nseen; i++)
        if (seen[i] == tid)
            return 0;
    if (nseen < MAX_SEEN)
        seen[nseen++] = tid;
    return 1;
}

static void nap_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* A stopped thread goes on, with the signal it stopped for if that is
 * one the program is sent (not an event, not a group stop). */
static void resume(pid_t tid, int status)
{
    int sig = WSTOPSIG(status);
    siginfo_t si;
    if (status >> 16 != 0 || (sig == SIGSTOP && first_stop(tid)) || sig == SIGTRAP ||
        ptrace(PTRACE_GETSIGINFO, tid, 0, &si) != 0)
        sig = 0;
    ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
}

static int child(char **argv)
{
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) {
        fprintf(stderr, "slowreap: PTRACE_TRACEME: %s\n", strerror(errno));
        _exit(125);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "slowreap: %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* The program stopped at its exec: from here every thread it clones is
 * traced as well. */
static int start(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
        return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
    long opts = PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL;
    if (ptrace(PTRACE_SETOPTIONS, pid, 0, (void *)opts) != 0) {
        fprintf(stderr, "slowreap: PTRACE_SETOPTIONS: %s\n", strerror(errno));
        kill(pid, SIGKILL);
        return 125;
    }
    first_stop(pid);
    ptrace(PTRACE_CONT, pid, 0, 0);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "slowreap: usage: slowreap DELAY_MS PROGRAM [ARG...]\n");
        return 2;
    }
    long delay = atol(argv[1]);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "slowreap: fork: %s\n", strerror(errno));
        return 125;
    }
    if (pid == 0)
        return child(argv + 2);
    /* DELAY_MS must be DELAY_MS on a loaded machine too (the library waits
     * 100 ms at most): the tracer, which only sleeps and waits, runs
     * before ordinary threads where it may (root, as CI); the program
     * keeps its own policy. */
    struct sched_param sp = { .sched_priority = 1 };
    sched_setscheduler(0, SCHED_FIFO, &sp);
    int rc = start(pid);
    if (rc >= 0)
        return rc;
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        /* Look first (WNOWAIT): an ended thread other than the program's
         * first is left a zombie, still counted, for DELAY_MS. */
        if (waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WNOWAIT | __WALL) != 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "slowreap: waitid: %s\n", strerror(errno));
            return 125;
        }
        pid_t tid = si.si_pid;
        int ended = si.si_code == CLD_EXITED || si.si_code == CLD_KILLED ||
                    si.si_code == CLD_DUMPED;
        if (ended && tid != pid)
            nap_ms(delay);
        int status;
        if (waitpid(tid, &status, __WALL) != tid)
            continue;
        if (tid == pid && WIFEXITED(status))
            return WEXITSTATUS(status);
        if (tid == pid && WIFSIGNALED(status))
            return 128 + WTERMSIG(status);
        if (WIFSTOPPED(status))
            resume(tid, status);
    }
}
