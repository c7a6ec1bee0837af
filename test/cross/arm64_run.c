/*
 * arm64_run.c - runs a program of the Debian arm64 root (scripts/cross-arm64)
 * the way the integration tests run an interpreter: same pid, same
 * environment, same paths.  Built by scripts/cross-arm64 for this machine,
 * static, with
 *   -DPS_ROOT="..."  the root,
 *   -DPS_PROG="..."  the program inside it (absent: argv[1] is),
 *   -DPS_BINDS="a:b" directories of this machine seen at the same path in
 *                    the root (the source and build trees);
 * /proc, /dev and /tmp are seen too.
 *
 * In a mount namespace of its own (the binds vanish with the process) it
 * binds those directories into the root, chroots there and execs the
 * program, which runs under qemu-user through binfmt_misc (the handler is
 * registered with F: it is opened when registered, so it need not exist
 * inside the root).
 *
 * Static, and it execs nothing of this machine's: the tests set
 * LD_PRELOAD to the arm64 library, which this machine's dynamic loader
 * would try to load into every program it starts (and complain on
 * stderr).  Everything here is system calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PS_BINDS
#define PS_BINDS ""
#endif

static void die(const char *what, const char *path)
{
    fprintf(stderr, "arm64_run: %s %s: %s\n", what, path, strerror(errno));
    exit(126);
}

/* mkdir -p of path inside the root (the mount point). */
static void make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s%s", PS_ROOT, path) >= (int)sizeof buf)
        die("path too long:", path);
    for (char *p = buf + strlen(PS_ROOT) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    }
    mkdir(buf, 0755);
}

static void bind(const char *path)
{
    char target[4096];
    struct stat st;
    if (path[0] != '/' || stat(path, &st) != 0)
        return;
    make_dirs(path);
    snprintf(target, sizeof target, "%s%s", PS_ROOT, path);
    if (mount(path, target, NULL, MS_BIND | MS_REC, NULL) != 0)
        die("cannot bind", path);
}

int main(int argc, char **argv)
{
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == NULL)
        strcpy(cwd, "/");
    if (unshare(CLONE_NEWNS) != 0)
        die("unshare", "(mount namespace)");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        die("cannot make private", "/");
    bind("/proc");
    bind("/dev");
    bind("/tmp");
    char binds[8192];
    snprintf(binds, sizeof binds, "%s", PS_BINDS);
    for (char *save = NULL, *d = strtok_r(binds, ":", &save); d; d = strtok_r(NULL, ":", &save))
        bind(d);
    if (chroot(PS_ROOT) != 0)
        die("chroot", PS_ROOT);
    if (chdir(cwd) != 0 && chdir("/") != 0)
        die("chdir", cwd);
#ifdef PS_PROG
    argv[0] = (char *)PS_PROG;
    execv(PS_PROG, argv);
    die("exec", PS_PROG);
#else
    if (argc < 2) {
        fprintf(stderr, "usage: arm64_run PROGRAM [ARG...]\n");
        return 2;
    }
    execv(argv[1], argv + 1);
    die("exec", argv[1]);
#endif
    (void)argc;
    return 126;
}
