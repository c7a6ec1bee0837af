/*
 * fake_darwin/mach/mach.h - just enough of Mach for test_darwin_copy.c to
 * compile lib/darwin/read.c and lib/darwin/suspend.c on Linux.  The test
 * defines the functions (thread_suspend parks a real thread at a safe point;
 * mach_vm_read_overwrite copies with process_vm_readv).
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

#define KERN_SUCCESS 0
#define KERN_INVALID_ADDRESS 1
#define KERN_TERMINATED 37
#define MACH_PORT_NULL ((mach_port_t)0)

extern uintptr_t vm_page_size;
mach_port_t mach_task_self(void);
kern_return_t thread_suspend(thread_act_t thread);
kern_return_t thread_resume(thread_act_t thread);

#endif
