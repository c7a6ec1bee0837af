/*
 * linux/dlwatch_aarch64.c - the dlopen and dlmopen stubs of dlwatch.c for
 * aarch64 (dlwatch_stub.h): what dlwatch_x86_64.c does, in this CPU's
 * instructions.
 */
#include "platform/linux/dlwatch_stub.h"

/* As dlwatch_x86_64.c does: the return address is x30, which the fast paths
 * leave alone; x16/x17 are the scratch registers the ABI gives veneers. */
__asm__(
    ".text\n"
    ".globl dlopen\n"
    ".type dlopen,%function\n"
    "dlopen:\n"
    "    adrp x16, ps_dl_real_dlopen\n"
    "    ldr x16, [x16, :lo12:ps_dl_real_dlopen]\n"
    "    cbnz x16, 1f\n"
    "    stp x29, x30, [sp, -32]!\n stp x0, x1, [sp, 16]\n"
    "    bl ps_dl_resolve\n"
    "    ldp x0, x1, [sp, 16]\n ldp x29, x30, [sp], 32\n"
    "    b dlopen\n"
    "1:  adrp x17, ps_dl_armed\n"
    "    ldr w17, [x17, :lo12:ps_dl_armed]\n"
    "    cbz w17, 2f\n"
    "    stp x29, x30, [sp, -32]!\n stp x0, x1, [sp, 16]\n"
    "    mov x1, x30\n"
    "    bl ps_dl_watch_ok\n"
    "    mov w17, w0\n"
    "    ldp x0, x1, [sp, 16]\n ldp x29, x30, [sp], 32\n"
    "    cbz w17, 2f\n"
    "    b ps_dl_watched_dlopen\n"
    "2:  adrp x16, ps_dl_real_dlopen\n"
    "    ldr x16, [x16, :lo12:ps_dl_real_dlopen]\n"
    "    br x16\n"
    ".size dlopen, .-dlopen\n");
#if PS_DL_NAMESPACES
__asm__(
    ".text\n"
    ".globl dlmopen\n"
    ".type dlmopen,%function\n"
    "dlmopen:\n"
    "    adrp x16, ps_dl_real_dlmopen\n"
    "    ldr x16, [x16, :lo12:ps_dl_real_dlmopen]\n"
    "    cbnz x16, 1f\n"
    "    stp x29, x30, [sp, -48]!\n stp x0, x1, [sp, 16]\n str x2, [sp, 32]\n"
    "    bl ps_dl_resolve\n"
    "    ldp x0, x1, [sp, 16]\n ldr x2, [sp, 32]\n ldp x29, x30, [sp], 48\n"
    "    b dlmopen\n"
    "1:  adrp x17, ps_dl_armed\n"
    "    ldr w17, [x17, :lo12:ps_dl_armed]\n"
    "    cbz w17, 2f\n"
    "    stp x29, x30, [sp, -48]!\n stp x0, x1, [sp, 16]\n str x2, [sp, 32]\n"
    "    mov x0, x1\n"
    "    mov x1, x30\n"
    "    bl ps_dl_watch_ok\n"
    "    mov w17, w0\n"
    "    ldp x0, x1, [sp, 16]\n ldr x2, [sp, 32]\n ldp x29, x30, [sp], 48\n"
    "    cbz w17, 2f\n"
    "    b ps_dl_watched_dlmopen\n"
    "2:  adrp x16, ps_dl_real_dlmopen\n"
    "    ldr x16, [x16, :lo12:ps_dl_real_dlmopen]\n"
    "    br x16\n"
    ".size dlmopen, .-dlmopen\n");
#endif
