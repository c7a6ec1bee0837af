/*
 * linux/target.c - another process's CPython symbols (target.h), for
 * pysample-attach: from its /proc/PID/maps and the files mapped there.
 *
 * Which files: the process's executable (a static CPython defines
 * _PyRuntime there) and each libpython*.so it maps.  A path in the maps is
 * the target's own: in another mount namespace (a container) the same
 * path here may be another file or none, so the file is opened through
 * /proc/PID/root, and it must be the inode the maps name: a file replaced
 * since it was loaded (an upgrade under a running server) would give wrong
 * addresses, and is refused.  The load bias is the start of the file's
 * mapping at offset 0 minus its first PT_LOAD's page-aligned address, as
 * image.c computes it for our own images.
 *
 * Symbols: .symtab and .dynsym, defined, global or weak (a local of the
 * same name is some static of another file).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "platform/target.h"

/* One line of maps: its start, file offset, inode and path. */
struct mapline {
    unsigned long lo, off, ino;
    unsigned maj, min;
    char path[512];
};

static int parse_line(const char *line, struct mapline *m)
{
    int at = 0;
    m->path[0] = '\0';
    if (sscanf(line, "%lx-%*x %*4s %lx %x:%x %lu %n", &m->lo, &m->off, &m->maj, &m->min, &m->ino,
               &at) < 5)
        return -1;
    snprintf(m->path, sizeof m->path, "%s", line + at);
    m->path[strcspn(m->path, "\n")] = '\0';
    return 0;
}

/* 1 if this mapping's file is one CPython's symbols may be in. */
static int wanted(const struct mapline *m, const char *exe)
{
    const char *base = strrchr(m->path, '/');
    base = base != NULL ? base + 1 : m->path;
    return m->off == 0 && m->ino != 0 && m->path[0] == '/' &&
           (strcmp(m->path, exe) == 0 || strncmp(base, "libpython", 9) == 0);
}

static const Elf64_Ehdr *elf_header(const uint8_t *map, size_t size)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)map;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_phoff > size ||
        eh->e_phnum > (size - eh->e_phoff) / sizeof(Elf64_Phdr) || eh->e_shoff > size ||
        eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr))
        return NULL;
    return eh;
}

static int image_bias(const uint8_t *map, size_t size, uintptr_t start, uintptr_t *bias)
{
    const Elf64_Ehdr *eh = elf_header(map, size);
    if (eh == NULL)
        return -1;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(map + eh->e_phoff);
    uintptr_t first = UINTPTR_MAX;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_vaddr & ~(uintptr_t)0xfff) < first)
            first = ph[i].p_vaddr & ~(uintptr_t)0xfff;
    if (first == UINTPTR_MAX)
        return -1;
    *bias = eh->e_type == ET_EXEC ? 0 : start - first;
    return 0;
}

/* Maps the file of m as pid sees it, if it is still the inode m names. */
static int add_image(struct ps_target *t, const struct mapline *m, char *why, size_t whylen)
{
    char file[600];
    struct stat st;
    snprintf(file, sizeof file, "/proc/%ld/root%s", (long)t->pid, m->path);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_ino != m->ino || major(st.st_dev) != m->maj ||
        minor(st.st_dev) != m->min) {
        snprintf(why, whylen, "%s: %s", m->path,
                 fd < 0 ? strerror(errno) : "not the file the process loaded (replaced since?)");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    struct ps_target_image *im = &t->img[t->n];
    if (map == MAP_FAILED || image_bias(map, (size_t)st.st_size, m->lo, &im->bias) != 0) {
        snprintf(why, whylen, "%s: not an ELF file we read", m->path);
        if (map != MAP_FAILED)
            munmap(map, (size_t)st.st_size);
        return -1;
    }
    snprintf(im->path, sizeof im->path, "%s", m->path);
    im->map = map;
    im->size = (size_t)st.st_size;
    t->n++;
    return 0;
}

/* The executable's path as the target's maps name it. */
static void exe_path(pid_t pid, char *exe, size_t len)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/%ld/exe", (long)pid);
    ssize_t n = readlink(link, exe, len - 1);
    exe[n > 0 ? (size_t)n : 0] = '\0';
}

int ps_target_open(struct ps_target *t, pid_t pid, char *why, size_t whylen)
{
    char path[64], line[1200], exe[512];
    memset(t, 0, sizeof *t);
    t->pid = pid;
    snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        int e = errno;
        snprintf(why, whylen, "cannot read %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    exe_path(pid, exe, sizeof exe);
    int rc = 0;
    struct mapline m;
    while (rc == 0 && t->n < PS_TARGET_IMAGES && fgets(line, sizeof line, f) != NULL)
        if (parse_line(line, &m) == 0 && wanted(&m, exe))
            rc = add_image(t, &m, why, whylen);
    fclose(f);
    if (rc == 0 && t->n == 0) {
        snprintf(why, whylen, "its executable and libraries are no CPython we know "
                 "(no libpython, and the executable is gone or unreadable)");
        rc = -1;
    }
    errno = 0;
    return rc;
}

void ps_target_close(struct ps_target *t)
{
    for (int i = 0; i < t->n; i++)
        munmap((void *)t->img[i].map, t->img[i].size);
    t->n = 0;
}

/* name among the symbols of section sh (a symbol table) of im: its value,
 * or 0. */
static uintptr_t table_lookup(const struct ps_target_image *im, const Elf64_Shdr *shs, int i,
                              const char *name)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)im->map;
    const Elf64_Shdr *sh = &shs[i];
    if (sh->sh_link >= eh->e_shnum || sh->sh_offset > im->size ||
        sh->sh_size > im->size - sh->sh_offset || sh->sh_entsize != sizeof(Elf64_Sym))
        return 0;
    const Elf64_Shdr *strs = &shs[sh->sh_link];
    if (strs->sh_offset > im->size || strs->sh_size > im->size - strs->sh_offset)
        return 0;
    const char *names = (const char *)im->map + strs->sh_offset;
    const Elf64_Sym *sym = (const Elf64_Sym *)(im->map + sh->sh_offset);
    size_t count = sh->sh_size / sizeof *sym, len = strlen(name);
    for (size_t k = 0; k < count; k++) {
        int bind = ELF64_ST_BIND(sym[k].st_info);
        if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_name >= strs->sh_size ||
            (bind != STB_GLOBAL && bind != STB_WEAK) || strs->sh_size - sym[k].st_name <= len)
            continue;
        if (memcmp(names + sym[k].st_name, name, len + 1) == 0)
            return (uintptr_t)sym[k].st_value;
    }
    return 0;
}

void *ps_target_lookup(const char *name, void *ctx)
{
    const struct ps_target *t = ctx;
    for (int n = 0; n < t->n; n++) {
        const struct ps_target_image *im = &t->img[n];
        const Elf64_Ehdr *eh = elf_header(im->map, im->size);
        if (eh == NULL)
            continue;
        const Elf64_Shdr *shs = (const Elf64_Shdr *)(im->map + eh->e_shoff);
        for (int i = 0; i < eh->e_shnum; i++) {
            if (shs[i].sh_type != SHT_SYMTAB && shs[i].sh_type != SHT_DYNSYM)
                continue;
            uintptr_t v = table_lookup(im, shs, i, name);
            if (v != 0)
                return (void *)(im->bias + v);
        }
    }
    return NULL;
}
