/*
 * darwin/native.c - native stacks on macOS: not yet (docs/native.md).
 *
 * The plan is the issue's: the suspended thread's registers from
 * thread_get_state() in the suspend window (suspend.c) feed unwind.c, and
 * the loaded images come from the dyld image list.  Until then
 * PYSAMPLE_NATIVE says so once and the profile has Python frames only.
 */
#include <stdio.h>

#include "../native.h"

int ps_native_platform_init(char *why, size_t whylen)
{
    snprintf(why, whylen, "native stacks are not supported on macOS yet");
    return -1;
}

int ps_native_capture(long tid, struct ps_regs *regs)
{
    (void)tid;
    regs->valid = 0;
    return PS_CAPTURE_FAILED;
}

int ps_native_release(void)
{
    return -1;
}

int ps_native_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    (void)sig;
    (void)act;
    (void)old;
    return -2;
}

void ps_native_after_fork(void)
{
}

void ps_native_counts(struct ps_native_counts *c)
{
    *c = (struct ps_native_counts){ 0 };
}

int ps_objs_refresh(uintptr_t interp)
{
    (void)interp;
    return 0;
}

const struct ps_obj *ps_objs_find(uintptr_t pc)
{
    (void)pc;
    return NULL;
}

uintptr_t ps_obj_eh_frame_hdr(const struct ps_obj *o)
{
    (void)o;
    return 0;
}

int ps_obj_is_interp(const struct ps_obj *o)
{
    (void)o;
    return 0;
}

const char *ps_obj_name(const struct ps_obj *o)
{
    (void)o;
    return "";
}

uintptr_t ps_obj_offset(const struct ps_obj *o, uintptr_t pc)
{
    (void)o;
    return pc;
}

const char *ps_obj_symbol(const struct ps_obj *o, uintptr_t pc)
{
    (void)o;
    (void)pc;
    return NULL;
}

void ps_objs_free(void)
{
}
