/*
 * image.c - a section of a loaded ELF image, found from its file and
 * /proc/self/maps (platform.h ps_image_section).
 *
 * CPython 3.14+ puts asyncio's self-description (_AsyncioDebug) in a
 * section of its own, ".AsyncioDebug", of the _asyncio extension module or
 * of the executable/libpython it is built into; the symbol is not exported,
 * so dlsym cannot find it.  The section's address is its sh_addr plus the
 * image's load bias: the start of the image's first mapping (file offset 0)
 * minus its first PT_LOAD's page-aligned p_vaddr.  Only open/read and no
 * loader lock: safe on the sampler thread, which may not wait for a thread
 * inside dlopen.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "platform/linux/linux.h"

#define MAX_SECTIONS 512

static int pread_all(int fd, void *buf, size_t n, off_t at)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, at + (off_t)done);
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* The file of the mapping in maps f that contains inside, into file.
 * 0, or -1 (no such mapping, or not a file's). */
static int file_of(FILE *f, uintptr_t inside, char *file, size_t filelen)
{
    char line[4096 + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %*x %*s %*u %n", &lo, &hi, &off) < 2 || off == 0)
            continue;
        if (inside >= lo && inside < hi) {
            char *p = line + off;
            p[strcspn(p, "\n")] = '\0';
            if (*p != '/' || strlen(p) >= filelen)
                return -1;
            strcpy(file, p);
            return 0;
        }
    }
    return -1;
}

/* The start of path's mapping at file offset 0 in maps f.  0, or -1. */
static int start_of(FILE *f, const char *path, uintptr_t *start)
{
    char line[4096 + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, offset;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*u %n", &lo, &hi, &offset, &off) < 3 || off == 0)
            continue;
        char *p = line + off;
        p[strcspn(p, "\n")] = '\0';
        if (offset == 0 && strcmp(p, path) == 0) {
            *start = lo;
            return 0;
        }
    }
    return -1;
}

/* The file of the mapping that contains inside (path NULL), or the start
 * of path's mapping at file offset 0.  0, or -1. */
static int find_mapping(const char *path, uintptr_t inside, char *file, size_t filelen,
                        uintptr_t *start)
{
    /* The C library's fopen, not our stand-in (interpose.c): the stand-in
     * is the program's way into the fork pause, which our reads are not. */
    FILE *f = ps_real_fopen("/proc/self/maps", "re", 0);
    int found = -1;
    if (f == NULL)
        return -1;
    if (path == NULL) {
        /* First pass: which file holds inside. */
        if (file_of(f, inside, file, filelen) == 0) {
            rewind(f);
            found = start_of(f, file, start);
        }
    } else if (strlen(path) < filelen) {
        strcpy(file, path);
        found = start_of(f, path, start);
    }
    ps_real_fclose(f);
    return found;
}

/* The ELF header of fd, if it is one we read: 64-bit, with a sane number
 * of sections and program headers of the sizes we expect.  0, or -1. */
static int read_header(int fd, Elf64_Ehdr *eh)
{
    if (pread_all(fd, eh, sizeof *eh, 0) != 0 || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shnum == 0 || eh->e_shnum > MAX_SECTIONS || eh->e_shstrndx >= eh->e_shnum ||
        eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum > 64)
        return -1;
    return 0;
}

/* The load bias of the image mapped at start: the first PT_LOAD maps file
 * offset 0.  0, or -1. */
static int load_bias(int fd, const Elf64_Ehdr *eh, uintptr_t start, uintptr_t *bias)
{
    Elf64_Phdr ph[64];
    if (pread_all(fd, ph, eh->e_phnum * sizeof ph[0], (off_t)eh->e_phoff) != 0)
        return -1;
    uintptr_t first = UINTPTR_MAX;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
            first = ph[i].p_vaddr & ~(uintptr_t)0xfff;
    if (first == UINTPTR_MAX)
        return -1;
    *bias = eh->e_type == ET_EXEC ? 0 : start - first;
    return 0;
}

/* A section looked for: its name, the image's load bias, and where its
 * address (biased) and size go. */
struct section_req {
    const char *name;
    uintptr_t bias;
    uintptr_t *addr;
    size_t *size;
};

/* The section q names among sh[] (names: the section names' table of
 * namelen bytes), if it is loaded: its address there and size.  0, or
 * -1. */
static int pick_section(const Elf64_Ehdr *eh, const Elf64_Shdr *sh, const char *names,
                        size_t namelen, const struct section_req *q)
{
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= namelen || strcmp(names + sh[i].sh_name, q->name) != 0)
            continue;
        if (sh[i].sh_addr == 0)
            return -1;  /* not loaded */
        *q->addr = q->bias + sh[i].sh_addr;
        *q->size = sh[i].sh_size;
        return 0;
    }
    return -1;
}

/* The section headers and their names' table read from fd, then the
 * section looked up among them.  0, or -1. */
static int find_section(int fd, const Elf64_Ehdr *eh, const char *section, uintptr_t bias,
                        uintptr_t *addr, size_t *size)
{
    Elf64_Shdr *sh = malloc(eh->e_shnum * sizeof *sh);
    char *names = NULL;
    int rc = -1;
    if (sh == NULL || pread_all(fd, sh, eh->e_shnum * sizeof *sh, (off_t)eh->e_shoff) != 0)
        goto out;
    const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
    if (strs->sh_size == 0 || strs->sh_size > (1u << 20))
        goto out;
    names = malloc(strs->sh_size + 1);
    if (names == NULL || pread_all(fd, names, strs->sh_size, (off_t)strs->sh_offset) != 0)
        goto out;
    names[strs->sh_size] = '\0';
    const struct section_req q = {section, bias, addr, size};
    rc = pick_section(eh, sh, names, strs->sh_size, &q);
out:
    free(sh);
    free(names);
    return rc;
}

int ps_image_section(const char *path, uintptr_t inside, const char *section, uintptr_t *addr,
                     size_t *size)
{
    char file[4096];
    uintptr_t start, bias;
    Elf64_Ehdr eh;

    if (find_mapping(path, inside, file, sizeof file, &start) != 0)
        return -1;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = read_header(fd, &eh) == 0 && load_bias(fd, &eh, start, &bias) == 0
                 ? find_section(fd, &eh, section, bias, addr, size) : -1;
    close(fd);
    return rc;
}
