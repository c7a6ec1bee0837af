/*
 * linux/linux.h - what the files of lib/linux/ share: the C library's own
 * definitions of the functions interpose.c stands in front of (libc.c).
 */
#ifndef PS_LINUX_H
#define PS_LINUX_H

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

sighandler_t ps_real_signal(int sig, sighandler_t handler);
FILE *ps_real_fopen(const char *path, const char *mode, int large);
int ps_real_fclose(FILE *f);
int ps_real_execve(const char *path, char *const argv[], char *const envp[]);
int ps_real_execvpe(const char *file, char *const argv[], char *const envp[]);
int ps_real_execv(const char *path, char *const argv[]);
int ps_real_execvp(const char *file, char *const argv[]);
int ps_real_fexecve(int fd, char *const argv[], char *const envp[]);
int ps_real_kill(pid_t pid, int sig);
int ps_real_raise(int sig);

#endif
