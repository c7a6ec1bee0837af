/*
 * linux/dlwatch_x86_64.c - the dlopen and dlmopen stubs of dlwatch.c for
 * x86_64 (dlwatch_stub.h).
 */
#include "platform/linux/dlwatch_stub.h"

/*
 * dlopen: if the pointer to the C library's dlopen is missing, resolve it
 * (saving the arguments) and start again; if the watch is off, jump to it;
 * else ask ps_dl_watch_ok(file, return address) and jump to the watched or
 * the plain one.  The return address stays at (%rsp) for the C library.
 * dlmopen is the same with the arguments one register further on.
 */
__asm__(
    ".text\n"
    ".globl dlopen\n"
    ".type dlopen,@function\n"
    "dlopen:\n"
    "    cmpq $0, ps_dl_real_dlopen(%rip)\n"
    "    jne 1f\n"
    "    pushq %rdi\n pushq %rsi\n subq $8, %rsp\n"
    "    call ps_dl_resolve\n"
    "    addq $8, %rsp\n popq %rsi\n popq %rdi\n"
    "1:  cmpl $0, ps_dl_armed(%rip)\n"
    "    je 2f\n"
    "    pushq %rdi\n pushq %rsi\n subq $8, %rsp\n"
    "    movq 24(%rsp), %rsi\n"
    "    call ps_dl_watch_ok\n"
    "    addq $8, %rsp\n popq %rsi\n popq %rdi\n"
    "    testl %eax, %eax\n"
    "    je 2f\n"
    "    jmp ps_dl_watched_dlopen\n"
    "2:  jmp *ps_dl_real_dlopen(%rip)\n"
    ".size dlopen, .-dlopen\n");
#if PS_DL_NAMESPACES
__asm__(
    ".text\n"
    ".globl dlmopen\n"
    ".type dlmopen,@function\n"
    "dlmopen:\n"
    "    cmpq $0, ps_dl_real_dlmopen(%rip)\n"
    "    jne 1f\n"
    "    pushq %rdi\n pushq %rsi\n pushq %rdx\n"
    "    call ps_dl_resolve\n"
    "    popq %rdx\n popq %rsi\n popq %rdi\n"
    "1:  cmpl $0, ps_dl_armed(%rip)\n"
    "    je 2f\n"
    "    pushq %rdi\n pushq %rsi\n pushq %rdx\n"
    "    movq %rsi, %rdi\n"
    "    movq 24(%rsp), %rsi\n"
    "    call ps_dl_watch_ok\n"
    "    popq %rdx\n popq %rsi\n popq %rdi\n"
    "    testl %eax, %eax\n"
    "    je 2f\n"
    "    jmp ps_dl_watched_dlmopen\n"
    "2:  jmp *ps_dl_real_dlmopen(%rip)\n"
    ".size dlmopen, .-dlmopen\n");
#endif
