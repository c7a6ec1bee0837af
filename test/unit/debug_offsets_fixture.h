/*
 * debug_offsets_fixture.h - reads the captured _Py_DebugOffsets blocks in
 * unit/fixtures/debug_offsets-*.txt (a comment line naming the build, the
 * Py_Version in hex, then the first 1 KiB of _PyRuntime in hex), shared by
 * the layout and thread-name unit tests.
 */
#ifndef PS_DEBUG_OFFSETS_FIXTURE_H
#define PS_DEBUG_OFFSETS_FIXTURE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

struct fixture {
    char name[256];
    uint32_t version;
    uint8_t block[1024];
};

static int load(const char *path, struct fixture *f)
{
    FILE *fp = fopen(path, "r");
    char line[4096];
    if (fp == NULL)
        return -1;
    int ok = fgets(f->name, sizeof f->name, fp) != NULL &&
             fscanf(fp, "%x\n", &f->version) == 1 &&
             fgets(line, sizeof line, fp) != NULL && strlen(line) >= 2048;
    for (int i = 0; ok && i < 1024; i++) {
        unsigned b;
        ok = sscanf(line + 2 * i, "%2x", &b) == 1;
        f->block[i] = (uint8_t)b;
    }
    fclose(fp);
    return ok ? 0 : -1;
}

/* Calls each(f, ctx) on every fixture of unit/fixtures whose file name
 * begins with prefix (a fixture that does not load is a failed check).
 * Returns how many there were. */
static int each_fixture(const char *prefix, void (*each)(struct fixture *f, void *ctx),
                        void *ctx)
{
    int n = 0;
    DIR *dir = opendir("unit/fixtures");
    CHECK(dir != NULL);
    struct dirent *de;
    while (dir != NULL && (de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char path[512];
        struct fixture *f = calloc(1, sizeof *f);
        if (f == NULL)
            break;
        snprintf(path, sizeof path, "unit/fixtures/%s", de->d_name);
        CHECK_EQ_INT(load(path, f), 0);
        each(f, ctx);
        free(f);
        n++;
    }
    if (dir != NULL)
        closedir(dir);
    return n;
}

#endif
