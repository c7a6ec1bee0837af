/*
 * chmod_window.c - preloaded before libpysample by test_control.py's
 * test_socket_mode_never_set_through_a_symlink: a chmod of a control
 * socket by name (pysample.*.sock) waits, up to 5 s, until the racing user
 * of the shared directory has swapped a symlink in for the socket, so that
 * the race a real attacker wins now and then is won every time.  Nothing
 * else changes: every call ends in the C library's own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

static void window(const char *path)
{
    if (path == NULL || strstr(path, "pysample.") == NULL || strstr(path, ".sock") == NULL)
        return;
    for (int i = 0; i < 500; i++) {
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return;
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
}

int chmod(const char *path, mode_t mode)
{
    int (*real)(const char *, mode_t) = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "chmod");
    window(path);
    return real(path, mode);
}

int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
    int (*real)(int, const char *, mode_t, int) =
        (int (*)(int, const char *, mode_t, int))dlsym(RTLD_NEXT, "fchmodat");
    window(path);
    return real(dirfd, path, mode, flags);
}
