/*
 * musl_probe.c - a C program built with musl-gcc that scripts/check-musl
 * runs with the musl build of libpysample preloaded and PYSAMPLE_OUTPUT set:
 * a process that is not Python, whose dlopen() goes through our stand-in
 * (the watch for a late libpython is armed there).  It prints how many
 * threads it has and whether dlopen() and dlsym() worked, and exits 7; with
 * the library inert, that output is the same as without it and no file or
 * stderr line appears.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int main(void)
{
    void *h = dlopen("libc.so", RTLD_NOW);
    int found = h != NULL && dlsym(h, "printf") != NULL;
    printf("threads %d dlopen %s\n", threads(), found ? "ok" : "failed");
    return 7;
}
