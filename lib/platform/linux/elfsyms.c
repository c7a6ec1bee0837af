/*
 * linux/elfsyms.c - the loaded objects and their function symbols, for the
 * native unwinder (where is an address's unwind table) and for names.
 *
 * The list comes from dl_iterate_phdr: per object its load bias, the range
 * of its executable segments and its PT_GNU_EH_FRAME (.eh_frame_hdr, which
 * the loader maps with the code).  It is rebuilt when the loader's
 * load/unload counters (dlpi_adds, dlpi_subs) move; checking them costs one
 * call that stops at the first object.  dl_iterate_phdr takes the loader's
 * lock, so this runs on the sampler thread before a tick and never while a
 * thread is held in our signal handler (which could be inside dlopen).
 *
 * Symbols are read from the object's file on disk, the first time an
 * address in it has to be named: .symtab where the file has one (static
 * functions: take_gil, the ceval helpers, a C extension's internals), else
 * .dynsym.  Functions only (STT_FUNC, STT_GNU_IFUNC), sorted by address;
 * names copied, the mapping of the file dropped at once.  A file that
 * changed since it was loaded (same path, other inode) is not trusted:
 * its addresses print as library.so+0x1234.  Memory: at most
 * PS_SYM_BUDGET bytes of symbols over all objects; past it, names are
 * offsets.  An object that was unloaded loses its table at the next
 * refresh (the table of one that stayed is kept across refreshes).
 *
 * The vDSO has no file, but the kernel maps its whole image, .dynsym
 * included: its symbols are read from memory (clock_gettime, gettimeofday,
 * getcpu: __vdso_clock_gettime ... in [vdso]).
 */

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/bsearch.h"
#include "platform/stacks.h"
#include "platform/linux/linux.h"

#define PS_SYM_BUDGET (256u << 20)
#define PS_OBJS_MAX 4096

struct sym {
    uint64_t addr;   /* relative to the load bias */
    uint32_t size;
    uint32_t name;   /* offset into strs */
};

struct ps_obj {
    uintptr_t lo, hi;          /* executable segments, [lo, hi) */
    uintptr_t bias;
    uintptr_t eh_hdr;
    int interp;
    int vdso;                  /* the vDSO: symbols from its image in memory */
    int syms_state;            /* 0 not loaded, 1 loaded, -1 none to be had */
    char *path;                /* malloc'ed */
    const char *name;          /* base name, inside path */
    struct sym *syms;
    size_t nsyms;
    char *strs;
    size_t bytes;
};

static struct {
    struct ps_obj *objs;       /* sorted by lo */
    size_t n;
    unsigned long long adds, subs;
    int have_counts;
    size_t sym_bytes;
    char exe[4096];
} T;

/* Bumped whenever the list changes (ps_objs_generation). */
static uint32_t objs_gen;

struct collect {
    struct ps_obj *objs;
    size_t n, cap;
    unsigned long long adds, subs;
    int first_only;
};

/* The span of the object's code (its executable PT_LOAD segments) and
 * where its .eh_frame_hdr is, into o. */
static void read_segments(const struct dl_phdr_info *info, struct ps_obj *o)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t a = o->bias + ph->p_vaddr, b = a + ph->p_memsz;
            if (a < o->lo)
                o->lo = a;
            if (b > o->hi)
                o->hi = b;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            o->eh_hdr = o->bias + ph->p_vaddr;
        }
    }
}

/* o's path and base name from the list's path: the vDSO, an object with
 * no name, or a file.  0, or -1 without memory. */
static int name_obj(struct ps_obj *o, const char *path)
{
    if (strncmp(path, "linux-vdso", 10) == 0 || strncmp(path, "linux-gate", 10) == 0) {
        o->path = strdup("[vdso]");
        o->vdso = 1;
    } else if (path[0] == '\0') {
        o->path = strdup("[unknown]");
        o->syms_state = -1;
    } else {
        o->path = strdup(path);
    }
    if (o->path == NULL)
        return -1;
    const char *slash = strrchr(o->path, '/');
    o->name = slash ? slash + 1 : o->path;
    return 0;
}

static int collect_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct collect *c = arg;
    if (c->first_only) {
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
            c->adds = info->dlpi_adds;
            c->subs = info->dlpi_subs;
        }
        return 1;
    }
    if (c->n == c->cap)
        return 0;
    struct ps_obj o;
    memset(&o, 0, sizeof o);
    o.bias = info->dlpi_addr;
    o.lo = UINTPTR_MAX;
    read_segments(info, &o);
    if (o.lo >= o.hi)
        return 0;
    const char *path = info->dlpi_name;
    if (path == NULL || path[0] == '\0')
        path = c->n == 0 && T.exe[0] ? T.exe : "";
    if (name_obj(&o, path) != 0)
        return 0;
    c->objs[c->n++] = o;
    return 0;
}

static int by_lo(const void *a, const void *b)
{
    const struct ps_obj *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void drop_syms(struct ps_obj *o)
{
    free(o->syms);
    free(o->strs);
    T.sym_bytes -= o->bytes;
    o->syms = NULL;
    o->strs = NULL;
    o->nsyms = 0;
    o->bytes = 0;
}

/*
 * Makes objs (n of them, malloc'ed; ownership passes here) the list.  The
 * symbols of objects that stayed (same code address, bias and path) are
 * kept, the others' freed.  The unwinder's rules cached per address are
 * forgotten: an object may have gone and another come at its address.
 */
/* The load bias of the object one of whose segments holds addr (what
 * glibc's dladdr1 gives; the C library's loader list is walked instead,
 * which musl has too). */
struct holder {
    uintptr_t addr, bias;
};

static int holder_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct holder *h = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && h->addr >= lo && h->addr - lo < ph->p_memsz) {
            h->bias = info->dlpi_addr;
            return 1;
        }
    }
    return 0;
}

static void install(struct ps_obj *objs, size_t n, uintptr_t interp)
{
    qsort(objs, n, sizeof *objs, by_lo);
    for (size_t i = 0; i < T.n; i++) {
        struct ps_obj *old = &T.objs[i];
        struct ps_obj *keep = NULL;
        for (size_t j = 0; j < n && keep == NULL; j++)
            if (objs[j].lo == old->lo && objs[j].bias == old->bias &&
                strcmp(objs[j].path, old->path) == 0)
                keep = &objs[j];
        if (keep != NULL && old->syms_state != 0) {
            keep->syms = old->syms;
            keep->strs = old->strs;
            keep->nsyms = old->nsyms;
            keep->bytes = old->bytes;
            keep->syms_state = old->syms_state;
        } else {
            drop_syms(old);
        }
        free(old->path);
    }
    free(T.objs);
    T.objs = objs;
    T.n = n;
    objs_gen++;
    /* The interpreter's code: the object whose data holds _PyRuntime
     * (the executable, or libpython), by its load bias. */
    struct holder h = { .addr = interp };
    if (interp != 0 && dl_iterate_phdr(holder_cb, &h) != 0)
        for (size_t i = 0; i < T.n; i++)
            T.objs[i].interp = T.objs[i].bias == h.bias;
}

int ps_objs_refresh(uintptr_t interp)
{
    struct collect c = { .first_only = 1 };
    if (T.exe[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", T.exe, sizeof T.exe - 1);
        T.exe[n > 0 ? n : 0] = '\0';
    }
    dl_iterate_phdr(collect_cb, &c);
    if (T.have_counts && c.adds == T.adds && c.subs == T.subs)
        return 0;
    struct collect all = { .objs = calloc(PS_OBJS_MAX, sizeof(struct ps_obj)), .cap = PS_OBJS_MAX };
    if (all.objs == NULL)
        return 0;
    dl_iterate_phdr(collect_cb, &all);
    install(all.objs, all.n, interp);
    T.adds = c.adds;
    T.subs = c.subs;
    T.have_counts = 1;
    return 1;
}

int ps_objs_replace(const struct ps_obj_desc *d, size_t n)
{
    struct ps_obj *objs = calloc(n ? n : 1, sizeof *objs);
    if (objs == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        objs[i].lo = d[i].lo;
        objs[i].hi = d[i].hi;
        objs[i].eh_hdr = d[i].eh_hdr;
        objs[i].syms_state = -1;
        objs[i].path = strdup(d[i].name);
        objs[i].name = objs[i].path;
        if (objs[i].path == NULL) {
            while (i > 0)
                free(objs[--i].path);
            free(objs);
            return -1;
        }
    }
    install(objs, n, 0);
    return 0;
}

void ps_objs_free(void)
{
    for (size_t i = 0; i < T.n; i++) {
        drop_syms(&T.objs[i]);
        free(T.objs[i].path);
    }
    free(T.objs);
    T.objs = NULL;
    T.n = 0;
    T.have_counts = 0;
    objs_gen++;
}

uint32_t ps_objs_generation(void)
{
    return objs_gen;
}

const struct ps_obj *ps_objs_find(uintptr_t pc)
{
    size_t lo = PS_UPPER_BOUND(T.objs, T.n, struct ps_obj, lo, pc);
    if (lo == 0)
        return NULL;
    const struct ps_obj *o = &T.objs[lo - 1];
    return pc < o->hi ? o : NULL;
}

uintptr_t ps_obj_eh_frame_hdr(const struct ps_obj *o)
{
    return o->eh_hdr;
}

int ps_obj_is_interp(const struct ps_obj *o)
{
    return o->interp;
}

const char *ps_obj_name(const struct ps_obj *o)
{
    return o->name;
}

uintptr_t ps_obj_offset(const struct ps_obj *o, uintptr_t pc)
{
    return pc - o->bias;
}

static int by_addr(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* How much of o's tables is allocated while they are built: cap entries
 * and strcap name bytes, of which strlen_ name bytes are used. */
struct sym_room {
    size_t cap, strcap, strlen_;
};

/* Appends the function symbol s, named nm (len bytes), to o's tables
 * (their room in *r).  0, or -1 without memory. */
static int append_sym(struct ps_obj *o, const ElfW(Sym) *s, const char *nm, size_t len,
                      struct sym_room *r)
{
    size_t *cap = &r->cap, *strcap = &r->strcap, *strlen_ = &r->strlen_;
    if (o->nsyms == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        struct sym *ns = realloc(o->syms, nc * sizeof *ns);
        if (ns == NULL)
            return -1;
        o->syms = ns;
        *cap = nc;
    }
    if (*strlen_ + len + 1 > *strcap) {
        size_t nc = *strcap ? *strcap * 2 : 16384;
        while (nc < *strlen_ + len + 1)
            nc *= 2;
        char *ns = realloc(o->strs, nc);
        if (ns == NULL)
            return -1;
        o->strs = ns;
        *strcap = nc;
    }
    memcpy(o->strs + *strlen_, nm, len + 1);
    o->syms[o->nsyms].addr = s->st_value;
    o->syms[o->nsyms].size = s->st_size > UINT32_MAX ? UINT32_MAX : (uint32_t)s->st_size;
    o->syms[o->nsyms].name = (uint32_t)*strlen_;
    o->nsyms++;
    *strlen_ += len + 1;
    o->bytes += sizeof(struct sym) + len + 1;
    return 0;
}

/* Symbols of one symbol table section (symtab, with its string table). */
static void add_section(struct ps_obj *o, const uint8_t *map, size_t size, const ElfW(Shdr) *sh,
                        const ElfW(Shdr) *str, struct sym_room *r)
{
    if (sh->sh_offset > size || sh->sh_size > size - sh->sh_offset ||
        str->sh_offset > size || str->sh_size > size - str->sh_offset ||
        sh->sh_entsize != sizeof(ElfW(Sym)))
        return;
    const ElfW(Sym) *s = (const ElfW(Sym) *)(map + sh->sh_offset);
    size_t n = sh->sh_size / sizeof *s;
    const char *names = (const char *)map + str->sh_offset;
    for (size_t i = 0; i < n; i++) {
        unsigned type = ELF64_ST_TYPE(s[i].st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s[i].st_value == 0 ||
            s[i].st_shndx == SHN_UNDEF || s[i].st_name >= str->sh_size)
            continue;
        const char *nm = names + s[i].st_name;
        size_t len = strnlen(nm, str->sh_size - s[i].st_name);
        if (len == 0 || len == str->sh_size - s[i].st_name)
            continue;
        if (T.sym_bytes + o->bytes + sizeof(struct sym) + len + 1 > PS_SYM_BUDGET)
            return;
        if (append_sym(o, &s[i], nm, len, r) != 0)
            return;
    }
}

/* The function symbols of the ELF image at map (size bytes: a file's
 * mapping, or the vDSO in memory): .symtab, else .dynsym. */
static void parse_syms(struct ps_obj *o, const uint8_t *map, size_t size)
{
    /* A truncated file would fault on the mapping: only the header and
     * tables inside size are touched, and a file's size was read after
     * open. */
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)map;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
        eh->e_shoff > size || (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > size - eh->e_shoff)
        return;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(map + eh->e_shoff);
    struct sym_room room = {0, 0, 0};
    int have_symtab = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
            if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
                continue;
            if (pass == 1 && have_symtab)
                continue;   /* .symtab is a superset of .dynsym's functions */
            add_section(o, map, size, &sh[i], &sh[sh[i].sh_link], &room);
            if (pass == 0)
                have_symtab = 1;
        }
    }
}

/* The vDSO's image: no file, but the kernel maps all of it, section
 * headers and .dynsym included (past its loadable segment), at
 * AT_SYSINFO_EHDR; how far the mapping goes, /proc/self/maps says.  Its
 * size, or 0 if there is none. */
static size_t vdso_image(const uint8_t **map)
{
    uintptr_t eh = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    /* The C library's fopen, not our stand-in (find_mapping in image.c). */
    FILE *f = eh != 0 ? ps_real_fopen("/proc/self/maps", "re", 0) : NULL;
    if (f == NULL)
        return 0;
    char line[512];
    size_t size = 0;
    while (size == 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (strstr(line, "[vdso]") != NULL && sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
            lo == eh && hi > lo)
            size = hi - lo;
    }
    ps_real_fclose(f);
    *map = (const uint8_t *)eh;
    return size;
}

static void load_syms(struct ps_obj *o)
{
    o->syms_state = -1;
    if (o->vdso) {
        const uint8_t *img = NULL;
        size_t size = vdso_image(&img);
        if (size > 0)
            parse_syms(o, img, size);
    } else {
        int fd = open(o->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return;
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(ElfW(Ehdr)) ||
            (uint64_t)st.st_size > (1ull << 32)) {
            close(fd);
            return;
        }
        size_t size = (size_t)st.st_size;
        const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (map == MAP_FAILED)
            return;
        parse_syms(o, map, size);
        munmap((void *)map, size);
    }
    if (o->nsyms == 0) {
        drop_syms(o);
        return;
    }
    qsort(o->syms, o->nsyms, sizeof *o->syms, by_addr);
    T.sym_bytes += o->bytes;
    o->syms_state = 1;
}

const char *ps_obj_symbol(const struct ps_obj *co, uintptr_t pc)
{
    struct ps_obj *o = (struct ps_obj *)co;
    if (o->syms_state == 0)
        load_syms(o);
    if (o->syms_state != 1)
        return NULL;
    uint64_t off = pc - o->bias;
    size_t lo = PS_UPPER_BOUND(o->syms, o->nsyms, struct sym, addr, off);
    if (lo == 0)
        return NULL;
    /* Among aliases at the same address, any will do; a sized symbol must
     * contain the address (an unsized one, from assembly, is taken). */
    const struct sym *s = &o->syms[lo - 1];
    if (s->size != 0 && off - s->addr >= s->size)
        return NULL;
    return o->strs + s->name;
}
