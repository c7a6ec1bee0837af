/*
 * linux/dlwatch.c - Python that arrives late: noticing a libpython that is
 * loaded after start-up (dlopen), so that uWSGI, mod_wsgi and any program
 * with a Python plugin get profiled like a Python executable.
 *
 * When it is on.  Only in a process that has PYSAMPLE_OUTPUT and no
 * _PyRuntime when the constructor runs (lifecycle: ps_dlwatch_arm).  In
 * every other process our dlopen() is one load and one jump to the C
 * library's: no work, no state, no change in behaviour.
 *
 * What a watched dlopen() costs.  After each successful call, if the
 * dynamic linker's count of loaded objects moved (dl_iterate_phdr's
 * dlpi_adds, read under its own lock), every loaded object's dynamic
 * symbol table is asked for a *defined* _PyRuntime through its hash table
 * (GNU or SysV; the GNU bloom filter answers "no" in a few instructions).
 * No dlsym(): a failed dlsym() leaves an error for the program's next
 * dlerror() and allocates its message; this lookup has no side effect at
 * all.  docs/performance.md has the figures.
 *
 * Who the caller is.  glibc's dlopen() resolves a bare name ("libfoo.so")
 * against the *calling* object's DT_RUNPATH/DT_RPATH and expands $ORIGIN
 * from it, and loads into the caller's link-map namespace; it learns the
 * caller from its return address.  A stand-in that calls dlopen() itself
 * would make every load look as if it came from libpysample.  So the
 * exported dlopen is a few instructions of assembly that *jump* to the C
 * library's (the return address untouched) unless the watch is on, and
 * even then a call whose outcome depends on the caller (a bare name from
 * an object with its own search path, a '$' in the name, a caller outside
 * the main namespace) is jumped through unwatched: the object is noticed
 * at the next watched dlopen(), which scans everything loaded since the
 * last scan.  musl's dlopen() searches as the main program would, whoever
 * calls it, and has no namespaces (no dlmopen): there, only a '$' in the
 * name goes through unwatched.  (Not at fork(): a fork handler may not
 * start the sampler, whose set-up registers fork handlers, under glibc's
 * lock of them.)
 * The stubs are one file per architecture (dlwatch_stub.h says which
 * and what they may call).  On architectures without one (not x86_64 or
 * aarch64) the stand-in is plain C and every call is treated as
 * caller-dependent: nothing changes, and a late libpython is only noticed
 * if a later, watchable dlopen() happens.
 *
 * When it is found.  The symbols the detection needs are copied out of
 * that object while the dynamic linker's lock guarantees it stays mapped
 * and reported to the callback lifecycle.c armed us with (dlwatch.h),
 * which detects the version and starts the sampler, which waits
 * (without spinning) until the interpreter is initialised: uWSGI loads its
 * plugin long before it calls Py_Initialize.  A second object that defines
 * a different _PyRuntime (another libpython) gets one "pysample:" line and
 * is never read.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "platform/dlwatch.h"
#include "platform/linux/dlwatch_stub.h"
#include "platform/linux/linux.h"
#include "util/message.h"

/* Read by the stubs (dlwatch_stub.h): keep the names and types. */
PS_HIDDEN dlopen_fn ps_dl_real_dlopen;
PS_HIDDEN _Atomic int ps_dl_armed;
#if PS_DL_NAMESPACES
PS_HIDDEN dlmopen_fn ps_dl_real_dlmopen;
#endif

static struct {
    _Atomic unsigned long long seen_adds;  /* dlpi_adds at the last scan */
    _Atomic uintptr_t runtime;             /* the _PyRuntime we profile */
    _Atomic int refused;                   /* said so about a second one */
    _Atomic int old_reported;              /* a CPython older than 3.7 reported */
    pthread_mutex_t scan_lock;             /* one scan at a time */
    ps_python_loaded_fn report;            /* lifecycle's; set before armed */
    char runtime_path[512];                /* the libpython reported, for messages */
} D = { .scan_lock = PTHREAD_MUTEX_INITIALIZER };

/* Called by the stubs when the pointers are not there yet (a library
 * constructor that runs before ours calls dlopen). */
PS_HIDDEN void ps_dl_resolve(void)
{
    if (ps_dl_real_dlopen == NULL)
        ps_dl_real_dlopen = (dlopen_fn)ps_libc_sym("dlopen");
#if PS_DL_NAMESPACES
    if (ps_dl_real_dlmopen == NULL)
        ps_dl_real_dlmopen = (dlmopen_fn)ps_libc_sym("dlmopen");
#endif
}

/* ---- symbol lookup in one loaded object ---------------------------------- */

struct elf_obj {
    uintptr_t base;
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const uint32_t *gnu_hash;
    const uint32_t *sysv_hash;
};

/* A d_ptr the dynamic linker relocated in place, or not (the vDSO's
 * dynamic section is read-only and keeps file offsets). */
static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

static int elf_open(const struct dl_phdr_info *info, struct elf_obj *o)
{
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (dyn == NULL)
        return -1;
    for (int n = 0; dyn->d_tag != DT_NULL && n < 4096; dyn++, n++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            o->symtab = (const ElfW(Sym) *)dyn_ptr(o->base, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            o->strtab = (const char *)dyn_ptr(o->base, dyn->d_un.d_ptr);
            break;
        case DT_STRSZ:
            o->strsz = dyn->d_un.d_val;
            break;
        case DT_GNU_HASH:
            o->gnu_hash = (const uint32_t *)dyn_ptr(o->base, dyn->d_un.d_ptr);
            break;
        case DT_HASH:
            o->sysv_hash = (const uint32_t *)dyn_ptr(o->base, dyn->d_un.d_ptr);
            break;
        }
    }
    if (o->symtab == NULL || o->strtab == NULL || (o->gnu_hash == NULL && o->sysv_hash == NULL))
        return -1;
    return 0;
}

static int sym_matches(const struct elf_obj *o, uint32_t idx, const char *name)
{
    const ElfW(Sym) *s = &o->symtab[idx];
    if (s->st_shndx == SHN_UNDEF || s->st_name >= o->strsz)
        return 0;
    int type = ELF64_ST_TYPE(s->st_info);
    if (type != STT_OBJECT && type != STT_FUNC && type != STT_NOTYPE)
        return 0;
    return strcmp(o->strtab + s->st_name, name) == 0;
}

/* elf_lookup through DT_GNU_HASH: its Bloom filter, then the bucket's
 * chain. */
static uintptr_t gnu_lookup(const struct elf_obj *o, const char *name)
{
    const uint32_t *h = o->gnu_hash;
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2], shift = h[3];
    if (nbuckets == 0 || bloom_size == 0)
        return 0;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(h + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t hv = 5381;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        hv = hv * 33 + *p;
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(hv / bits) % bloom_size];
    ElfW(Addr) mask = ((ElfW(Addr))1 << (hv % bits)) | ((ElfW(Addr))1 << ((hv >> shift) % bits));
    if ((word & mask) != mask)
        return 0;
    uint32_t idx = buckets[hv % nbuckets];
    if (idx < symoffset)
        return 0;
    for (int n = 0; n < 1 << 20; n++, idx++) {
        uint32_t h2 = chain[idx - symoffset];
        if ((hv | 1) == (h2 | 1) && sym_matches(o, idx, name))
            return o->base + o->symtab[idx].st_value;
        if (h2 & 1)
            break;
    }
    return 0;
}

/* elf_lookup through DT_HASH (System V), where there is no GNU table. */
static uintptr_t sysv_lookup(const struct elf_obj *o, const char *name)
{
    const uint32_t *h = o->sysv_hash;
    uint32_t nbucket = h[0], nchain = h[1];
    if (nbucket == 0)
        return 0;
    uint32_t hv = 0, g;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        hv = (hv << 4) + *p;
        g = hv & 0xf0000000u;
        if (g)
            hv ^= g >> 24;
        hv &= ~g;
    }
    uint32_t idx = h[2 + hv % nbucket];
    for (uint32_t n = 0; idx != STN_UNDEF && idx < nchain && n < nchain; n++) {
        if (sym_matches(o, idx, name))
            return o->base + o->symtab[idx].st_value;
        idx = h[2 + nbucket + idx];
    }
    return 0;
}

/* Address of the defined symbol name in o, or 0.  The tables were checked
 * by the dynamic linker when it loaded the object (it resolves through the
 * same ones); the loops are bounded all the same. */
static uintptr_t elf_lookup(const struct elf_obj *o, const char *name)
{
    return o->gnu_hash != NULL ? gnu_lookup(o, name) : sysv_lookup(o, name);
}

/* ---- the scan ------------------------------------------------------------ */

/* The symbols ps_python_detect_with() asks for, copied out of the object
 * (_PyRuntime first); the last ones tell an interpreter too old to profile
 * by its version (runtime.c). */
static const char *const wanted[] = {
    "_PyRuntime", "PyCode_Type", "Py_Version", "Py_NewRef", "PyFrame_GetCode",
    "_Py_PrintReferenceAddresses", "_Py_ForgetReference",
    "Py_Initialize", "PyString_FromString", "PyCapsule_New", "PyOS_FSPath",
    "PyCode_NewWithPosOnlyArgs",
};
#define NWANTED (sizeof wanted / sizeof wanted[0])

struct scan {
    unsigned long long adds;
    int first;               /* only reading dlpi_adds */
    uintptr_t found[NWANTED];
    char path[512];
    uintptr_t other;         /* a second _PyRuntime */
    char other_path[512];
    int old;                 /* found[] are those of a CPython without _PyRuntime */
};

/* Copies the wanted symbols of o, and its name, into s. */
static void take_symbols(struct scan *s, const struct elf_obj *o, struct dl_phdr_info *info)
{
    for (size_t i = 0; i < NWANTED; i++)
        s->found[i] = elf_lookup(o, wanted[i]);
    snprintf(s->path, sizeof s->path, "%s",
             info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "the program");
}

/*
 * An object without _PyRuntime that is a CPython all the same (2.7, 3.6:
 * Py_Initialize and PyCode_Type defined) is reported once, unless a
 * profiled one was found: the process asked to be profiled and must hear
 * that this one cannot be (runtime.c names its version).
 */
static void note_old(struct scan *s, const struct elf_obj *o, struct dl_phdr_info *info)
{
    if (s->found[0] != 0 || s->old || atomic_load(&D.runtime) != 0 ||
        atomic_load(&D.old_reported) || elf_lookup(o, "Py_Initialize") == 0 ||
        elf_lookup(o, "PyCode_Type") == 0)
        return;
    take_symbols(s, o, info);
    s->old = 1;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct scan *s = arg;
    if (s->first) {
        s->adds = size >= offsetof(struct dl_phdr_info, dlpi_subs) ? info->dlpi_adds : 0;
        return 1;
    }
    struct elf_obj o;
    if (elf_open(info, &o) != 0)
        return 0;
    uintptr_t rt = elf_lookup(&o, "_PyRuntime");
    if (rt == 0) {
        note_old(s, &o, info);
        return 0;
    }
    uintptr_t ours = atomic_load(&D.runtime);
    if (rt == ours || rt == s->found[0])
        return 0;
    if (ours != 0 || s->found[0] != 0) {
        if (s->other == 0) {
            s->other = rt;
            snprintf(s->other_path, sizeof s->other_path, "%s",
                     info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "the program");
        }
        return 0;
    }
    s->old = 0;  /* a profiled CPython wins over an old one seen before it */
    take_symbols(s, &o, info);
    return 0;
}

static void *found_sym(const char *name, void *ctx)
{
    const struct scan *s = ctx;
    for (size_t i = 0; i < NWANTED; i++)
        if (strcmp(wanted[i], name) == 0)
            return (void *)s->found[i];
    return NULL;
}

/* Looks at what was loaded since the last look.  Cheap when nothing was.
 * A dlopen() made while we are starting the profiler (from inside scan,
 * on this thread) is not scanned again: the lock is not recursive. */
static _Thread_local int in_scan;

static void scan(void)
{
    if (in_scan)
        return;
    struct scan s;
    memset(&s, 0, sizeof s);
    s.first = 1;
    dl_iterate_phdr(scan_one, &s);
    if (s.adds != 0 && s.adds == atomic_load(&D.seen_adds))
        return;
    pthread_mutex_lock(&D.scan_lock);
    in_scan = 1;
    s.first = 0;
    dl_iterate_phdr(scan_one, &s);
    atomic_store(&D.seen_adds, s.adds);
    if (s.found[0] != 0) {
        atomic_store(&D.runtime, s.found[0]);
        snprintf(D.runtime_path, sizeof D.runtime_path, "%s", s.path);
        D.report(found_sym, &s, s.path);
    } else if (s.old && !atomic_exchange(&D.old_reported, 1)) {
        D.report(found_sym, &s, s.path);
    }
    if (s.other != 0 && !atomic_exchange(&D.refused, 1))
        ps_say("a second Python runtime was loaded (%s) next to the one being "
               "profiled (%s); it is not profiled", s.other_path, D.runtime_path);
    in_scan = 0;
    pthread_mutex_unlock(&D.scan_lock);
}

/* ---- when the caller matters --------------------------------------------- */

/* 1 if dlopen(file) from caller may find something else than the same call
 * from libpysample would (see the top of the file). */
static int caller_matters(const char *file, const void *caller)
{
    if (file == NULL)
        return 0;
    if (strchr(file, '$') != NULL)
        return 1;
    if (strchr(file, '/') != NULL)
        return 0;
#if PS_DL_NAMESPACES
    Dl_info info;
    struct link_map *lm = NULL;
    if (dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0 || lm == NULL)
        return 1;
    Lmid_t ns = LM_ID_BASE;
    if (dlinfo(lm, RTLD_DI_LMID, &ns) != 0 || ns != LM_ID_BASE)
        return 1;
    for (const ElfW(Dyn) *d = lm->l_ld; d != NULL && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_RUNPATH || d->d_tag == DT_RPATH)
            return 1;
#endif
    return 0;
}

/* ---- the stand-ins --------------------------------------------------------
 *
 * ps_dl_watch_ok(file, caller): called by the stub (dlwatch_<arch>.c)
 * when the watch is on; 0 sends the call straight through.
 * ps_dl_watched_dlopen(file, mode): the watched call itself, entered by a
 * jump from the stub.
 */
PS_HIDDEN int ps_dl_watch_ok(const char *file, const void *caller)
{
    return !caller_matters(file, caller);
}

PS_HIDDEN void *ps_dl_watched_dlopen(const char *file, int mode)
{
    void *h = ps_dl_real_dlopen(file, mode);
    if (h != NULL && atomic_load(&ps_dl_armed))
        scan();
    return h;
}

#if PS_DL_NAMESPACES
PS_HIDDEN void *ps_dl_watched_dlmopen(Lmid_t ns, const char *file, int mode)
{
    void *h = ps_dl_real_dlmopen(ns, file, mode);
    if (h != NULL && atomic_load(&ps_dl_armed))
        scan();
    return h;
}
#endif

/* ---- arming -------------------------------------------------------------- */

static void child_after_fork(void)
{
    /* The scan lock may have been held by a thread that does not exist
     * in the child. */
    pthread_mutex_init(&D.scan_lock, NULL);
}

void ps_dlwatch_arm(ps_python_loaded_fn loaded)
{
    D.report = loaded;
    ps_dl_resolve();
    if (ps_dl_real_dlopen == NULL)
        return;
    pthread_atfork(NULL, NULL, child_after_fork);
    atomic_store(&ps_dl_armed, 1);
}
