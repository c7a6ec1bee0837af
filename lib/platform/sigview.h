/*
 * platform/sigview.h - what the program sees of a signal the library owns
 * or watches, and how a signal reaches the program's handler through ours.
 *
 * One table (ps_sig_role) says, for every signal, whose it is and what the
 * library does with it; the sigaction()/signal() stand-ins
 * (linux/interpose_sigaction.c) look a signal up there and hand it to the
 * file named in its row.  Those files keep the program's action in a
 * struct ps_sigview and deliver through ps_sigview_deliver(), which follows
 * the kernel's rules, so the three places where our handler stands in front
 * of the program's (faultview.c, linux/regs.c, linux/fatal.c) cannot drift
 * apart.  The rules are in sigview.c.
 *
 * POSIX only, no OS test: faultview.c, which uses it, is built for macOS
 * too.
 */
#ifndef PS_PLATFORM_SIGVIEW_H
#define PS_PLATFORM_SIGVIEW_H

#include <signal.h>
#include <stdatomic.h>

/* Whose a signal is. */
enum ps_sig_owner {
    PS_SIG_PROGRAM,   /* the program's only: sigaction() goes to the kernel */
    PS_SIG_SHARED,    /* both use it: ours stays first, the program's handler
                       * gets every occurrence that is not ours */
    PS_SIG_LIBRARY,   /* the library's own (native-stack requests); the
                       * program's handler gets the ones the library did not send */
    PS_SIG_WATCHED,   /* the program's; ours stands in only while the
                       * program has it at the default, to write the profile first */
};

/* Which file keeps the program's view of it (the stand-ins dispatch on this). */
enum ps_sig_keeper {
    PS_SIGKEEP_NONE,     /* nobody: the kernel's action is the program's view */
    PS_SIGKEEP_FAULT,    /* memory/faultview.c: fault-safe reads */
    PS_SIGKEEP_NATIVE,   /* linux/regs.c: native-stack registers */
    PS_SIGKEEP_FATAL,    /* linux/fatal.c: profile written before dying */
};

struct ps_sig_role {
    int sig;
    enum ps_sig_owner owner;
    enum ps_sig_keeper keeper;
    const char *what;    /* what the library does with it, for people */
};

/* The row of sig; signals not in the table get a PS_SIG_PROGRAM row. */
const struct ps_sig_role *ps_sig_role(int sig);
/* The table itself (for the unit test and for docs): n rows. */
const struct ps_sig_role *ps_sig_roles(int *n);
/* The signals of its PS_SIGKEEP_FATAL rows (those our fatal-signal
 * handler writes the profile on) added to *set. */
void ps_sig_fatal_add(sigset_t *set);

/*
 * The program's action for one signal, as the kernel would report it.
 * Written by sigaction() on any thread and read by signal handlers, so no
 * lock: a slot is filled, then an atomic index publishes it (sigview.c).
 */
#define PS_SIGVIEW_SLOTS 16u

struct ps_sigview {
    int sig;
    /* our handler in front of the view: a view that names it (the program
     * saved ours and put it back) is never called, which would loop */
    void (*ours)(int sig, siginfo_t *si, void *uc);
    _Atomic unsigned cur;
    _Atomic unsigned next;   /* slot allocator */
    struct sigaction slots[PS_SIGVIEW_SLOTS];
};

/* Starts the view of sig with installed (what the kernel had before ours,
 * already in the kernel's form); ours is the handler we put in front.  Not
 * concurrent with the calls below. */
void ps_sigview_init(struct ps_sigview *v, int sig, void (*ours)(int, siginfo_t *, void *),
                     const struct sigaction *installed);
/* What sigaction(sig, NULL, out) tells the program. */
void ps_sigview_get(struct ps_sigview *v, struct sigaction *out);
/* The program's sigaction(sig, act, old): act (may be NULL) becomes the view
 * in the kernel's form; old (may be NULL, may be act) gets the previous. */
void ps_sigview_set(struct ps_sigview *v, const struct sigaction *act, struct sigaction *old);

/* 1 if sa names a function (not SIG_DFL or SIG_IGN): the kernel looks at the
 * pointer alone, whatever SA_SIGINFO says. */
int ps_sigaction_has_function(const struct sigaction *sa);

/* What ps_sigview_deliver did. */
enum ps_sigview_outcome {
    PS_SIGVIEW_RAN,       /* the program's handler ran (and returned) */
    PS_SIGVIEW_IGNORED,   /* SIG_IGN: dropped, as the kernel would */
    PS_SIGVIEW_DEFAULT,   /* SIG_DFL (or a loop of handlers): the caller
                           * takes the default action (ps_sigview_default) */
};

/*
 * Delivers one occurrence of v's signal to the program's view, from inside
 * our handler, as the kernel would have: see sigview.c.  uc is our handler's
 * context (its uc_sigmask is the interrupted code's mask); from_fault says
 * the hardware raised it (then SIG_IGN cannot hold: default).  after_reset
 * (may be NULL) runs when SA_RESETHAND has just reset the view, before the
 * handler, for the length of this call.  Async-signal-safe; errno is
 * restored to saved_errno before the handler runs and left as it leaves it.
 */
enum ps_sigview_outcome ps_sigview_deliver(struct ps_sigview *v, siginfo_t *si, void *uc,
                                           int from_fault, int saved_errno,
                                           void (*after_reset)(struct ps_sigview *v));

/*
 * The default action of v's signal, from our handler: nothing for a signal
 * the kernel ignores by default; otherwise SIG_DFL goes back in (the view's
 * flags and mask kept) and, unless the hardware raised it (the faulting
 * instruction runs again by itself), the signal is sent to this thread again
 * and unblocked, so the process dies of it now, as it would have without us.
 * Returns only if it did not die (the signal ignored by default, or held
 * back by something else).  Async-signal-safe.
 */
void ps_sigview_default(struct ps_sigview *v, int from_fault);

/* 1 if the kernel's default action for sig is to ignore it. */
int ps_sig_default_ignores(int sig);

/* A fork child: only the forking thread is left; forget the others'
 * deliveries in flight (the loop guard's records). */
void ps_sigview_after_fork(void);

#endif
