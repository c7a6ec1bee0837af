/*
 * owner.c - the process our state belongs to (owner.h).
 *
 * Its pid, atomic: the stand-ins read it from any thread (and from signal
 * handlers) while the lifecycle claims it.  A vfork child borrows this
 * very variable, so only its own getpid() tells it from its parent.
 */
#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/owner.h"

static _Atomic pid_t owner;

void ps_owner_claim(void)
{
    atomic_store(&owner, getpid());
}

int ps_owner_here(void)
{
    pid_t p = atomic_load(&owner);
    return p != 0 && getpid() == p;
}
