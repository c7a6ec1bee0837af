/*
 * fake_darwin/mach/mach.h - just enough of Mach for test_darwin_copy.c to
 * compile lib/platform/darwin/read.c, suspend.c and regs.c on Linux.  The test
 * defines the functions (thread_suspend parks a real thread at a safe point;
 * mach_vm_read_overwrite copies with process_vm_readv; thread_get_state
 * hands out the registers the test chose).  The types and constants are
 * those of the public Mach ABI, written out here.
 */
#ifndef FAKE_MACH_H
#define FAKE_MACH_H

#include <stdint.h>

typedef int kern_return_t;
typedef unsigned int mach_port_t;
typedef mach_port_t vm_map_t;
typedef mach_port_t thread_act_t;
typedef uint64_t mach_vm_address_t;
typedef uint64_t mach_vm_size_t;
typedef unsigned int mach_msg_type_number_t;
typedef int thread_state_flavor_t;
typedef unsigned int *thread_state_t;

#define KERN_SUCCESS 0
#define KERN_INVALID_ADDRESS 1
#define KERN_FAILURE 5
#define KERN_TERMINATED 37
#define MACH_PORT_NULL ((mach_port_t)0)

extern uintptr_t vm_page_size;
mach_port_t mach_task_self(void);
mach_port_t mach_thread_self(void);
kern_return_t mach_port_deallocate(mach_port_t task, mach_port_t name);
kern_return_t thread_suspend(thread_act_t thread);
kern_return_t thread_resume(thread_act_t thread);
kern_return_t thread_get_state(thread_act_t thread, thread_state_flavor_t flavor,
                               thread_state_t state, mach_msg_type_number_t *count);

/* arm64: the layout of _STRUCT_ARM_THREAD_STATE64 (UNIX03 names). */
typedef struct {
    uint64_t __x[29];
    uint64_t __fp, __lr, __sp, __pc;
    uint32_t __cpsr, __pad;
} arm_thread_state64_t;
#define ARM_THREAD_STATE64 6
#define ARM_THREAD_STATE64_COUNT \
    ((mach_msg_type_number_t)(sizeof(arm_thread_state64_t) / sizeof(uint32_t)))
#define __darwin_arm_thread_state64_get_pc(ts) ((ts).__pc)
#define __darwin_arm_thread_state64_get_lr(ts) ((ts).__lr)
#define __darwin_arm_thread_state64_get_sp(ts) ((ts).__sp)
#define __darwin_arm_thread_state64_get_fp(ts) ((ts).__fp)

/* x86_64: the layout of _STRUCT_X86_THREAD_STATE64 (UNIX03 names). */
typedef struct {
    uint64_t __rax, __rbx, __rcx, __rdx, __rdi, __rsi, __rbp, __rsp;
    uint64_t __r8, __r9, __r10, __r11, __r12, __r13, __r14, __r15;
    uint64_t __rip, __rflags, __cs, __fs, __gs;
} x86_thread_state64_t;
#define x86_THREAD_STATE64 4
#define x86_THREAD_STATE64_COUNT \
    ((mach_msg_type_number_t)(sizeof(x86_thread_state64_t) / sizeof(uint32_t)))

#endif
