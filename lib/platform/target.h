/*
 * target.h - another process read from outside (pysample-attach,
 * docs/attach.md): where its CPython's symbols are, and reading its
 * memory and its threads' facts instead of our own.
 *
 * Linux only (lib/platform/linux/target.c): macOS would need the task
 * port of another process, which only root or a signed debugger gets.
 * Nothing in the library itself uses this header; only the attach
 * executable does, before its first read.
 */
#ifndef PS_TARGET_H
#define PS_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PS_TARGET_IMAGES 4

/* The images of pid that may define CPython's symbols: its executable
 * and any libpython, each mapped read-only from its file as pid sees it
 * (through /proc/PID/root: another mount namespace's path). */
struct ps_target {
    pid_t pid;
    int n;
    struct ps_target_image {
        char path[512];        /* as pid's maps name it */
        uintptr_t bias;        /* its load bias in pid */
        const uint8_t *map;    /* the file, mapped read-only */
        size_t size;
    } img[PS_TARGET_IMAGES];
};

/*
 * Finds pid's executable and libpython in /proc/PID/maps and maps their
 * files.  0, or -1 with why said (the maps unreadable: errno says whether
 * it is permission; a file replaced since it was loaded).
 */
int ps_target_open(struct ps_target *t, pid_t pid, char *why, size_t whylen);
void ps_target_close(struct ps_target *t);

/* A defined global symbol of t's images, as an address in pid, or NULL:
 * the lookup ps_python_detect_with() takes (ctx is the struct ps_target). */
void *ps_target_lookup(const char *name, void *ctx);

/*
 * From now on ps_plat_read() reads pid's memory (process_vm_readv only,
 * which needs the right to trace pid), after one probe read of 8 bytes at
 * probe.  0, or -1 with errno (EPERM: no right to trace it).
 */
int ps_plat_read_target(pid_t pid, uintptr_t probe);

/* Thread names are read from pid's /proc/PID/task from now on. */
void ps_threads_target(pid_t pid);

/* 3.9/3.10 keep no tid in a thread state: from now on a thread's tid is the
 * 32-bit value at offset in the struct its pthread_t points to (found by
 * the caller: the C library's layout, glibc's or musl's). */
void ps_threads_target_tid_at(long offset);

#endif
