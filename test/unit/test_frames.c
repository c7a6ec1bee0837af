/*
 * test_frames.c - the frame walker (frames.c), the code cache (codecache.c:
 * identity, hits, its bound and replacement) and the stack table's
 * aggregation of what they produce, on fake
 * interpreter memory built here: frame objects chained through f_back,
 * code objects whose type is "the" code type, and compact ASCII str
 * objects (fake_layout.h), laid out by a layout of our own (3.9-style
 * frame objects).
 * Everything is read through ps_read(), as in a real process.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "python/codecache.h"
#include "python/framebatch.h"
#include "python/frames.h"
#include "python/walkplan.h"
#include "memory/memread.h"
#include "profile/render.h"
#include "profile/stacktab.h"
#include "util/symtab.h"

#include "fake_layout.h"

/* The fake frames (the code and str objects are fake_layout.h's).
 * A 3.11+-style frame on a data stack: FAKE_SPECIALS bytes, then locals. */
struct fake_iframe {
    uintptr_t code, previous, instr;
    int8_t owner;
    uint8_t pad[7];
};
#define FAKE_SPECIALS ((uint32_t)sizeof(struct fake_iframe))

struct fake_frame {
    int64_t refcnt;
    uintptr_t back, code;
    int32_t lasti;
    int32_t pad;
};

static const struct ps_layout layout = {
    .hexversion = 0x03090000,
    .minor = 9,
    .frame_kind = PS_FRAMES_OBJECT,
    .pos_kind = PS_POS_LASTI_BYTES,
    .fr_read = sizeof(struct fake_frame),
    .fr_back = offsetof(struct fake_frame, back),
    .fr_code = offsetof(struct fake_frame, code),
    .fr_pos = offsetof(struct fake_frame, lasti),
    .fr_owner = PS_NOFIELD,
    .fr_tlbc_index = PS_NOFIELD,
    FAKE_OBJECT_FIELDS,
    .co_nunits = PS_NOFIELD,
    .co_code_adaptive = PS_NOFIELD,
    .co_tlbc = PS_NOFIELD,
    .co_stacksize = PS_NOFIELD,
    .co_nlocalsplus = PS_NOFIELD,
    .fr_specials = PS_NOFIELD,
    .fr_is_entry = PS_NOFIELD,
};

static struct ps_python py;

/* rq's walk, begun at frame instead. */
static int walk_from(struct ps_walk_req rq, uintptr_t frame, struct ps_walk_res *res)
{
    rq.frame = frame;
    return ps_walk(&rq, res);
}

static void make_frame(struct fake_frame *f, struct fake_frame *back, struct fake_code *code)
{
    memset(f, 0, sizeof *f);
    f->refcnt = 1;      /* whoever evaluates it */
    f->back = (uintptr_t)back;
    f->code = (uintptr_t)code;
    if (back != NULL)
        back->refcnt++; /* f_back is a reference */
}

/*
 * 3.11+: frames on a data stack (frames.c, data_stack_linked and the span
 * reads).  A callee must sit at its caller + the caller's size, or at the
 * start of a new chunk whose predecessor recorded that top; generator
 * frames in between do not count; a frame linked to a caller whose slot
 * holds a function of another size (the caller returned and called
 * something else while we read) drops the walk.
 */
static _Alignas(4096) uint8_t stack_a[8192], stack_b[8192];

static struct fake_iframe *iframe_at(uint8_t *at, struct fake_iframe *previous,
                                     struct fake_code *code, int owner)
{
    struct fake_iframe *f = (struct fake_iframe *)at;
    memset(f, 0, sizeof *f);
    f->code = (uintptr_t)code;
    f->previous = (uintptr_t)previous;
    f->owner = (int8_t)owner;
    return f;
}

static size_t words_of(const struct fake_code *c)
{
    return FAKE_SPECIALS / 8 + (size_t)c->stacksize + (size_t)c->nlocalsplus;
}

/* The code cache and symbol table a walk test resolves into. */
struct walk_fix {
    struct ps_codecache cc;
    struct ps_symtab syms;
};

static void walk_fix_open(struct walk_fix *f)
{
    CHECK_EQ_INT(ps_codecache_init(&f->cc, 64), 0);
    CHECK_EQ_INT(ps_symtab_init(&f->syms, 1000), 0);
}

static void walk_fix_close(struct walk_fix *f)
{
    ps_codecache_clear(&f->cc);
    ps_codecache_free(&f->cc);
    ps_symtab_free(&f->syms);
}

/* py with a 3.11-style layout of struct fake_iframe. */
static void interp_layout(struct ps_python *ipy)
{
    *ipy = py;
    struct ps_layout *L = &ipy->L;
    L->hexversion = 0x030B0000;
    L->minor = 11;
    L->frame_kind = PS_FRAMES_INTERP;
    L->pos_kind = PS_POS_INSTR_PTR;
    L->fr_read = sizeof(struct fake_iframe);
    L->fr_back = offsetof(struct fake_iframe, previous);
    L->fr_code = offsetof(struct fake_iframe, code);
    L->fr_pos = offsetof(struct fake_iframe, instr);
    L->fr_owner = offsetof(struct fake_iframe, owner);
    L->owner_first_native = 3;
    L->fr_is_entry = PS_NOFIELD;
    L->fr_specials = FAKE_SPECIALS;
    L->co_stacksize = offsetof(struct fake_code, stacksize);
    L->co_nlocalsplus = offsetof(struct fake_code, nlocalsplus);
}

static void test_data_stack(uintptr_t file)
{
    struct ps_python ipy;
    interp_layout(&ipy);

    static struct fake_str s_run, s_small, s_big, s_exit, s_gen;
    static struct fake_code c_run, c_small, c_big, c_exit, c_gen;
    make_code(&c_run, make_str(&s_run, "run"), file, 1);
    make_code(&c_small, make_str(&s_small, "locked"), file, 10);
    make_code(&c_big, make_str(&s_big, "other"), file, 20);
    make_code(&c_exit, make_str(&s_exit, "__exit__"), file, 30);
    make_code(&c_gen, make_str(&s_gen, "gen"), file, 40);
    c_run.nlocalsplus = 3, c_run.stacksize = 4;
    c_small.nlocalsplus = 0, c_small.stacksize = 5;
    c_big.nlocalsplus = 9, c_big.stacksize = 7;
    c_exit.nlocalsplus = 2, c_exit.stacksize = 4;

    struct walk_fix fx;
    walk_fix_open(&fx);
    struct ps_codecache *cc = &fx.cc;
    struct ps_symtab *syms = &fx.syms;
    uint64_t out[16];
    struct ps_walk_res res;
    const struct ps_walk_req rq = { .py = &ipy, .cc = cc, .syms = syms, .out = out, .max = 16 };

    /* run -> locked -> __exit__, each at its caller's end: a stack. */
    uint8_t *at = stack_a + 64;
    struct fake_iframe *run = iframe_at(at, NULL, &c_run, 0);
    at += 8 * words_of(&c_run);
    struct fake_iframe *locked = iframe_at(at, run, &c_small, 0);
    struct fake_iframe *exit_ = iframe_at(at + 8 * words_of(&c_small), locked, &c_exit, 0);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)exit_, &res), 3);
    CHECK_EQ_INT(out[0] >> 32, ps_sym_python(syms, "__exit__", "app.py"));

    /* The plan made once (the sampler's, walkplan.h) walks as the one a
     * walk makes; one made for another interpreter is not taken, and a
     * layout no walk can use makes none. */
    struct walk_plan made;
    uint64_t own[3];
    memcpy(own, out, sizeof own);
    CHECK_EQ_INT(ps_walk_plan_make(&made, &ipy), 0);
    CHECK(made.scope == NULL);
    struct ps_walk_req rq_made = rq;
    rq_made.plan = &made;
    memset(out, 0, sizeof out);
    CHECK_EQ_INT(walk_from(rq_made, (uintptr_t)exit_, &res), 3);
    CHECK(memcmp(own, out, sizeof own) == 0);
    struct ps_python unusable = ipy;
    unusable.L.fr_read = 4096;
    rq_made.py = &unusable;
    CHECK_EQ_INT(walk_from(rq_made, (uintptr_t)exit_, &res), PS_WALK_UNREADABLE);
    CHECK_EQ_INT(ps_walk_plan_make(&made, &unusable), PS_WALK_UNREADABLE);
    rq_made.py = &ipy;
    CHECK_EQ_INT(walk_from(rq_made, (uintptr_t)exit_, &res), 3);

    /* Entry marks (native stacks, merge.c): a C-stack shim (owner 3 here)
     * begins an evaluation-loop call, so the frame before it was that
     * call's first, as the outermost frame always is; no other is. */
    static struct fake_iframe shim;
    uint8_t entry[16];
    struct ps_walk_req rq_marks = rq;
    rq_marks.entry = entry;
    iframe_at((uint8_t *)&shim, run, &c_run, 3);
    locked->previous = (uintptr_t)&shim;
    memset(entry, 7, sizeof entry);
    CHECK_EQ_INT(walk_from(rq_marks, (uintptr_t)exit_, &res), 3);
    CHECK_EQ_INT(entry[0], 0);
    CHECK_EQ_INT(entry[1], 1);
    CHECK_EQ_INT(entry[2], 1);
    locked->previous = (uintptr_t)run;

    /* locked returned and run called other in its slot; __exit__'s stale
     * frame still links there: worker;other;__exit__ is no stack. */
    iframe_at(at, run, &c_big, 0);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)exit_, &res), PS_WALK_INCONSISTENT);
    /* ... while a frame where other's size puts it is fine. */
    struct fake_iframe *leaf = iframe_at(at + 8 * words_of(&c_big), (struct fake_iframe *)at,
                                         &c_exit, 0);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)leaf, &res), 3);

    /* A generator's frame (owner 1, in its object) between caller and
     * callee does not move the top: the callee sits at other's end. */
    static struct fake_iframe genframe;
    iframe_at((uint8_t *)&genframe, (struct fake_iframe *)at, &c_gen, 1);
    leaf->previous = (uintptr_t)&genframe;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)leaf, &res), 4);
    CHECK_EQ_INT(out[1] >> 32, ps_sym_python(syms, "gen", "app.py"));

    /* A callee in a new chunk: right after the chunk header, whose
     * previous chunk recorded the top it left (other's end). */
    uintptr_t *hdr_a = (uintptr_t *)stack_a, *hdr_b = (uintptr_t *)stack_b;
    hdr_a[0] = 0, hdr_a[1] = sizeof stack_a;
    hdr_a[2] = (uintptr_t)(at + 8 * words_of(&c_big) - (stack_a + 24)) / 8;
    hdr_b[0] = (uintptr_t)stack_a, hdr_b[1] = sizeof stack_b, hdr_b[2] = 0;
    struct fake_iframe *far = iframe_at(stack_b + 24, (struct fake_iframe *)at, &c_exit, 0);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)far, &res), 3);
    /* ... but not if the old chunk's top says otherwise. */
    hdr_a[2] += 1;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)far, &res), PS_WALK_INCONSISTENT);

    /* A recursion: one read of its code object serves every frame of the
     * copy taken before that read ... */
    uint8_t *r0 = stack_b + 2048;
    size_t step = 8 * words_of(&c_gen);
    struct fake_iframe *rec[4];
    for (int i = 0; i < 4; i++)
        rec[i] = iframe_at(r0 + (size_t)i * step, i ? rec[i - 1] : NULL, &c_gen, 0);
    uint64_t looked = cc->hits + cc->misses;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[3], &res), 4);
    CHECK_EQ_INT(cc->hits + cc->misses - looked, 1);
    /* ... but a frame copied after it (a generator's, read alone) has it
     * read again ... */
    static struct fake_iframe gen2;
    iframe_at((uint8_t *)&gen2, rec[1], &c_gen, 1);
    rec[2]->previous = (uintptr_t)&gen2;
    looked = cc->hits + cc->misses;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[3], &res), 5);
    CHECK(cc->hits + cc->misses - looked >= 2);
    /* ... and nothing is kept from one walk to the next: a code object
     * replaced at the same address (other names) is seen at once. */
    c_gen.name = (uintptr_t)&s_exit;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[3], &res), 5);
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(out[i] >> 32, ps_sym_python(syms, "__exit__", "app.py"));

    walk_fix_close(&fx);
}

/*
 * 3.11+: the blocks below a span copied before any code object is read
 * (framespan.h), so that one read of a code object serves them all.  A
 * 100-deep recursion of one function, 128 bytes a frame, over four 4 KiB
 * blocks, the top frame 4 frames into its block: its code object is
 * looked up once for the top block and once for the three below it (the
 * walk is 16 frames in when it gets there), not once per block (4).
 * Below the stack's mapping is an unmapped page, which no link leads to
 * and nothing reads; a link that does is not followed past it.
 */
static void test_span_blocks(uintptr_t file)
{
    struct ps_python ipy;
    interp_layout(&ipy);
    static struct fake_str s_rec;
    static struct fake_code c_rec;
    make_code(&c_rec, make_str(&s_rec, "rec"), file, 50);
    c_rec.nlocalsplus = 2, c_rec.stacksize = 10;   /* 32 + 96 bytes */
    size_t step = 8 * words_of(&c_rec);
    uint8_t *map = mmap(NULL, 5 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    CHECK(map != MAP_FAILED);
    uint8_t *stack = map + 4096;
    struct fake_iframe *rec[100];
    for (int i = 0; i < 100; i++)
        rec[i] = iframe_at(stack + 64 + (size_t)i * step, i ? rec[i - 1] : NULL, &c_rec, 0);

    struct walk_fix fx;
    walk_fix_open(&fx);
    struct ps_codecache *cc = &fx.cc;
    struct ps_symtab *syms = &fx.syms;
    uint64_t out[128];
    struct ps_walk_res res;
    struct ps_walk_req rq = { .py = &ipy, .cc = cc, .syms = syms, .out = out, .max = 128 };
    uint64_t looked = cc->hits + cc->misses;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[99], &res), 100);
    CHECK_EQ_INT(cc->hits + cc->misses - looked, 2);
    for (int i = 0; i < 100; i++)
        CHECK_EQ_INT(out[i] >> 32, ps_sym_python(syms, "rec", "app.py"));
    /* Cut at max: the same frames as a walk read block by block. */
    rq.max = 40;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[99], &res), 40);
    CHECK_EQ_INT(res.truncated, 1);
    rq.max = 128;
    /* A torn link into the unmapped page: the walk ends, unreadable, and
     * the next one is whole.  The page is unmapped, not PROT_NONE: every
     * read path fails on it, where /proc/self/mem (the path when
     * process_vm_readv is refused, as under qemu-user, which lacks it)
     * reads a PROT_NONE page's bytes.  It is unmapped only here, after
     * every allocation, and checked still unmapped: musl's malloc maps
     * small regions of its own, and one placed in the hole (the musl CI
     * step's failure) would make the link readable. */
    CHECK_EQ_INT(munmap(map, 4096), 0);
    CHECK(msync(map, 4096, MS_ASYNC) == -1 && errno == ENOMEM);
    rec[10]->previous = (uintptr_t)(map + 4096 - 128);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[99], &res), PS_WALK_UNREADABLE);
    rec[10]->previous = (uintptr_t)rec[9];
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)rec[99], &res), 100);

    munmap(map + 4096, 4 * 4096);
    walk_fix_close(&fx);
}

/*
 * 3.11+: the walk's table of code objects (framecode.h: 64 slots, two
 * per code object, code_slot and code_slot2, repeated here, white box).
 * A 30-deep recursion cycling through n code objects, all in one copy,
 * must look each up once (n), however their slots overlap; a code object
 * evicted by another reads its code object again on its next frame.
 */
static uint64_t walk_hash(uintptr_t code)
{
    return (uint64_t)code * 0x9E3779B97F4A7C15ull;
}

static size_t walk_slot(uintptr_t code)
{
    return (size_t)(walk_hash(code) >> 58);
}

static size_t walk_slot2(uintptr_t code)
{
    uint64_t h = walk_hash(code);
    return (size_t)((h >> 58) ^ ((h >> 52) | 1)) & 63;
}

/* Code lookups of the walk of 30 frames whose codes, leaf first, are
 * code[0], code[1], ... code[n - 1], code[0], ... */
static uint64_t cycle_lookups(struct fake_code **code, int n, uintptr_t file)
{
    struct ps_python ipy;
    interp_layout(&ipy);
    static struct fake_str s_name;
    uintptr_t name = make_str(&s_name, "cycle");
    for (int k = 0; k < n; k++) {
        make_code(code[k], name, file, 60 + k);
        code[k]->stacksize = 12;    /* 32 + 96 bytes */
    }
    size_t step = 8 * words_of(code[0]);
    uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    struct fake_iframe *f[30];
    for (int i = 0; i < 30; i++)
        f[i] = iframe_at(page + 64 + (size_t)i * step, i ? f[i - 1] : NULL, code[(29 - i) % n], 0);

    struct walk_fix fx;
    walk_fix_open(&fx);
    uint64_t out[64];
    struct ps_walk_res res;
    struct ps_walk_req rq = { .py = &ipy, .cc = &fx.cc, .syms = &fx.syms, .out = out, .max = 64 };
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)f[29], &res), 30);
    uint64_t looked = fx.cc.hits + fx.cc.misses;
    munmap(page, 4096);
    walk_fix_close(&fx);
    return looked;
}

/* The first of pool's code objects (after from) whose slots are (i, j),
 * -1 for "any"; NULL if none.  Each code object is taken once. */
static struct fake_code *code_in(struct fake_code *pool, int n, int i, int j, int not_j,
                                 uint8_t *taken)
{
    for (int k = 0; k < n; k++) {
        uintptr_t a = (uintptr_t)&pool[k];
        if (!taken[k] && (i < 0 || walk_slot(a) == (size_t)i) &&
            (j < 0 || walk_slot2(a) == (size_t)j) && walk_slot2(a) != (size_t)not_j) {
            taken[k] = 1;
            return &pool[k];
        }
    }
    return NULL;
}

static void test_codes_collide(uintptr_t file)
{
    enum { N = 4096 };
    static struct fake_code pool[N];
    static uint8_t taken[N];
    struct fake_code *c[3];

    /* Two code objects with one first slot both stay (a table of one
     * slot per hash had them evict each other on every frame: 30). */
    c[0] = code_in(pool, N, -1, -1, -1, taken);
    c[1] = code_in(pool, N, (int)walk_slot((uintptr_t)c[0]), -1, -1, taken);
    CHECK(c[1] != NULL);
    CHECK_EQ_INT(cycle_lookups(c, 2, file), 2);

    /* Three with one first slot and other second slots: all stay, in
     * their second slots.  The 32-slot table kept a code object in its
     * slot or the next, so these three took turns in two slots (30), as
     * five of the benchmark's ten levels did on 3.16. */
    memset(taken, 0, sizeof taken);
    int i = (int)walk_slot((uintptr_t)&pool[0]);
    c[0] = code_in(pool, N, i, -1, -1, taken);
    c[1] = code_in(pool, N, i, -1, -1, taken);
    c[2] = code_in(pool, N, i, -1, (int)walk_slot2((uintptr_t)c[1]), taken);
    CHECK(c[1] != NULL && c[2] != NULL);
    CHECK_EQ_INT(cycle_lookups(c, 3, file), 3);

    /* Three whose pair is full when the third comes (one first slot; the
     * second and third share their second one too): the first moves to
     * its own second slot, free, and makes room.  Without the move the
     * third evicted it, and it was read again (4). */
    memset(taken, 0, sizeof taken);
    struct fake_code *a = NULL, *b = NULL;
    for (int k = 0; k < N && b == NULL; k++) {
        memset(taken, 0, sizeof taken);
        taken[k] = 1;
        a = &pool[k];
        b = code_in(pool, N, (int)walk_slot((uintptr_t)a), -1, (int)walk_slot2((uintptr_t)a),
                    taken);
        if (b == NULL)
            continue;
        c[2] = code_in(pool, N, (int)walk_slot((uintptr_t)a), (int)walk_slot2((uintptr_t)b),
                       -1, taken);
        if (c[2] == NULL)
            b = NULL;
    }
    CHECK(b != NULL);
    c[0] = a;
    c[1] = b;
    CHECK_EQ_INT(cycle_lookups(c, 3, file), 3);
}

/* Renders t and returns the text (malloc'ed). */
static char *render(const struct ps_stacktab *t, const struct ps_symtab *syms)
{
    char *out = NULL;
    size_t len = 0;
    CHECK_EQ_INT(ps_render(t, syms, &out, &len), 0);
    return out;
}

/*
 * The code cache on its own: bounded, least recently used way replaced.
 * Which set an address falls in is codecache.c's business (ps_code_set);
 * the test asks it to build a set's worth of collisions.
 */
static size_t set_of(const struct ps_codecache *c, uintptr_t addr)
{
    return ps_code_set(c, addr);
}

static const struct ps_code_entry *resolve(struct ps_codecache *c, struct ps_symtab *syms,
                                           struct fake_code *code)
{
    return ps_code_resolve(c, &py, syms, 0, (uintptr_t)code, (const uint8_t *)code);
}

static void test_codecache_bounds(uintptr_t file)
{
    enum { N = 3000 };
    static struct fake_code codes[N];
    static struct fake_str names[N];
    struct ps_codecache c;
    struct ps_symtab syms;
    CHECK_EQ_INT(ps_codecache_init(&c, 256), 0);
    CHECK_EQ_INT(ps_symtab_init(&syms, 100000), 0);
    size_t cap = c.sets * PS_CODECACHE_WAYS;
    CHECK(cap >= 256 && cap < 1024);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "gen%d", i);
        make_code(&codes[i], make_str(&names[i], name), file, i + 1);
    }

    /* Many more code objects than entries: every one resolves to its own
     * function, and the cache never holds more than its size. */
    for (int i = 0; i < N; i++) {
        const struct ps_code_entry *e = resolve(&c, &syms, &codes[i]);
        CHECK(e != NULL);
        if (e != NULL && i % 500 == 0) {
            struct ps_sym sym;
            ps_sym_get(&syms, e->func, &sym);
            CHECK_EQ_STR(sym.name, names[i].data);
            CHECK_EQ_INT(e->id.firstlineno, i + 1);
        }
    }
    CHECK_EQ_INT(c.misses, N);
    CHECK_EQ_INT(resolve(&c, &syms, &codes[N - 1])->id.addr, (uintptr_t)&codes[N - 1]);
    CHECK_EQ_INT(c.hits, 1);
    /* The first one was pushed out by the later ones of its set. */
    int later = 0;
    for (int i = 1; i < N; i++)
        later += set_of(&c, (uintptr_t)&codes[i]) == set_of(&c, (uintptr_t)&codes[0]);
    CHECK(later >= PS_CODECACHE_WAYS);
    resolve(&c, &syms, &codes[0]);
    CHECK_EQ_INT(c.misses, N + 1);

    /* Five code objects of one set: the fifth replaces the least recently
     * used of the four, not the oldest. */
    ps_codecache_clear(&c);
    struct fake_code *same[5];
    int k = 0;
    for (int i = 0; i < N && k < 5; i++)
        if (set_of(&c, (uintptr_t)&codes[i]) == set_of(&c, (uintptr_t)&codes[0]))
            same[k++] = &codes[i];
    CHECK_EQ_INT(k, 5);
    if (k == 5) {
        uint64_t h = c.hits, m = c.misses;
        for (int i = 0; i < 4; i++)
            resolve(&c, &syms, same[i]);
        resolve(&c, &syms, same[0]);           /* same[1] is now the least recent */
        resolve(&c, &syms, same[4]);
        CHECK_EQ_INT(c.misses - m, 5);
        CHECK_EQ_INT(c.hits - h, 1);
        resolve(&c, &syms, same[0]);
        resolve(&c, &syms, same[2]);
        resolve(&c, &syms, same[3]);
        resolve(&c, &syms, same[4]);
        CHECK_EQ_INT(c.hits - h, 5);          /* all still there ... */
        resolve(&c, &syms, same[1]);
        CHECK_EQ_INT(c.misses - m, 6);        /* ... but the one replaced */
    }
    ps_codecache_clear(&c);
    ps_codecache_free(&c);
    ps_symtab_free(&syms);
}

/* Pages of the profile's code cache (16384 entries) that the entries of
 * the code objects at base, base + step, ... (n of them) are on. */
static int table_pages(const struct ps_codecache *c, uintptr_t base, uintptr_t step, int n)
{
    size_t pages[64];
    int np = 0;
    for (int i = 0; i < n && i < 64; i++) {
        size_t off = ps_code_set(c, base + (uintptr_t)i * step) * sizeof(struct ps_code_set);
        int seen = 0;
        for (int k = 0; k < np; k++)
            seen |= pages[k] == off / 4096;
        if (!seen)
            pages[np++] = off / 4096;
    }
    return np;
}

/*
 * Where code objects fall in the cache (ps_code_set): ten made together
 * (a few hundred bytes apart) in 3 pages of the table at most, not ~10:
 * a tick that starts cold pays a TLB miss per page (issue #36); objects at
 * one offset of different 1 MiB regions spread over the sets.
 */
static void test_codecache_sets(void)
{
    struct ps_codecache c;
    CHECK_EQ_INT(ps_codecache_init(&c, 16384), 0);
    for (uintptr_t base = 0x7f3a12345000u; base < 0x7f3a12345000u + 8 * 0x9f30u; base += 0x9f30u)
        CHECK(table_pages(&c, base + 0x58, 400, 10) <= 3);
    size_t sets[64];
    int distinct = 0;
    for (int i = 0; i < 64; i++) {
        sets[i] = ps_code_set(&c, 0x7f3a00000000u + ((uintptr_t)i << 20) + 0x1230);
        int seen = 0;
        for (int k = 0; k < i; k++)
            seen |= sets[k] == sets[i];
        distinct += !seen;
    }
    CHECK(distinct >= 56);
    ps_codecache_free(&c);
}

/*
 * The walk's one recovery point (frames.c, "One recovery point per walk"):
 * on the direct path, inside a batch, a fault in the walk's own read of a
 * frame or of a code object ends that walk as unreadable, and every read
 * and walk after it works as before, inside the batch and out of it.
 * good: a readable stack of 3 frames; code: a readable code object.
 */
static void test_walk_fault(struct ps_codecache *cc, struct ps_symtab *syms,
                            struct fake_frame *good, struct fake_code *code)
{
    ps_mem_enable_direct();
    if (ps_mem_mode() != PS_READ_DIRECT) {
        printf("test_walk_fault: no direct path here, skipped\n");
        return;
    }
    /* A page that faults on every read. */
    uint8_t *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    static struct fake_frame caller_gone, code_gone;
    make_frame(&caller_gone, NULL, code);
    caller_gone.back = (uintptr_t)(page + 64);  /* (make_frame would count a reference there) */
    make_frame(&code_gone, NULL, (struct fake_code *)(page + 128));

    uint64_t out[32];
    struct ps_walk_res res;
    const struct ps_walk_req rq = { .py = &py, .cc = cc, .syms = syms, .out = out, .max = 16 };
    int held = ps_mem_batch_begin();
    CHECK_EQ_INT(held, 1);
    for (int round = 0; round < 3; round++) {
        /* the top frame, a caller, a code object: each read faults */
        CHECK_EQ_INT(walk_from(rq, (uintptr_t)(page + 256), &res), PS_WALK_UNREADABLE);
        CHECK_EQ_INT(walk_from(rq, (uintptr_t)&caller_gone, &res), PS_WALK_UNREADABLE);
        CHECK_EQ_INT(walk_from(rq, (uintptr_t)&code_gone, &res), PS_WALK_UNREADABLE);
        /* ... and then a plain read that faults, and a good walk. */
        uint64_t word;
        CHECK_EQ_INT(ps_read(&word, (uintptr_t)page, sizeof word), -1);
        CHECK_EQ_INT(walk_from(rq, (uintptr_t)good, &res), 3);
    }
    /* Cut at max just above that caller, 17 frames down (batched past
     * the 16th): the frames copied ahead (framebatch.h) stop where the
     * walk stops, so the bad link below is never read and the cut stack
     * stands. */
    static struct fake_frame callees[17];
    for (int i = 0; i < 17; i++)
        make_frame(&callees[i], i > 0 ? &callees[i - 1] : &caller_gone, code);
    struct ps_walk_req rq_cut = rq;
    rq_cut.max = 17;
    CHECK_EQ_INT(walk_from(rq_cut, (uintptr_t)&callees[16], &res), 17);
    CHECK_EQ_INT(res.truncated, 1);
    /* Not cut: the batch's chain read (memread.h, ps_read_chain_in_scope)
     * follows the bad link in the middle of its frames: the fault ends
     * the walk unreadable, and reads and walks after it work. */
    static uint64_t deep_out[64];
    struct ps_walk_req rq_deep = rq;
    rq_deep.out = deep_out;
    rq_deep.max = 64;
    for (int round = 0; round < 2; round++) {
        CHECK_EQ_INT(walk_from(rq_deep, (uintptr_t)&callees[16], &res), PS_WALK_UNREADABLE);
        uint64_t word;
        CHECK_EQ_INT(ps_read(&word, (uintptr_t)page, sizeof word), -1);
        CHECK_EQ_INT(walk_from(rq, (uintptr_t)good, &res), 3);
    }
    /* A link the chain may not follow (below the first page, not
     * 8-aligned) ends the batch there, and the walk at that frame. */
    caller_gone.back = 0x800;
    CHECK_EQ_INT(walk_from(rq_deep, (uintptr_t)&callees[16], &res), PS_WALK_UNREADABLE);
    caller_gone.back = (uintptr_t)good + 4;
    CHECK_EQ_INT(walk_from(rq_deep, (uintptr_t)&callees[16], &res), PS_WALK_UNREADABLE);
    caller_gone.back = 0;
    CHECK_EQ_INT(walk_from(rq_deep, (uintptr_t)&callees[16], &res), 18);
    caller_gone.back = (uintptr_t)(page + 64);
    ps_mem_batch_end(held);
    /* Outside the batch the same walks give the same answers. */
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&caller_gone, &res), PS_WALK_UNREADABLE);
    CHECK_EQ_INT(walk_from(rq_deep, (uintptr_t)&callees[16], &res), PS_WALK_UNREADABLE);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)good, &res), 3);
    munmap(page, 4096);
}

/*
 * 3.9/3.10: frames copied in batches (framebatch.h), so that one read of
 * a code object serves every frame of the batch copied before it: a
 * 300-deep recursion of one function resolves its code object for each
 * of the first 16 frames (read alone), then once per batch of 256 (twice:
 * 256 frames, then 28), not once per frame (or per batch of 64: 5 times,
 * as before the batches grew), and reports the same stack.
 */
static void test_frame_batch(struct ps_codecache *cc, struct ps_symtab *syms, uintptr_t file)
{
    static struct fake_str s_r;
    static struct fake_code c_r;
    static struct fake_frame deep[300];
    make_code(&c_r, make_str(&s_r, "rec"), file, 30);
    for (int i = 0; i < 300; i++)
        make_frame(&deep[i], i > 0 ? &deep[i - 1] : NULL, &c_r);
    static uint64_t out[512];
    struct ps_walk_res res;
    struct ps_walk_req rq = { .py = &py, .cc = cc, .syms = syms, .out = out, .max = 512 };
    uint64_t before = cc->hits + cc->misses;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&deep[299], &res), 300);
    CHECK_EQ_INT(cc->hits + cc->misses - before, 16 + 2);
    for (int i = 0; i < 300; i++)
        CHECK_EQ_INT(out[i] >> 32, ps_sym_python(syms, "rec", "app.py"));
    /* From here on walks 100 deep, from deep[99]. */
    rq.max = 128;
    /* Cut at max inside a batch, and a freed frame in its middle: the
     * checks see each copied frame as before. */
    rq.max = 10;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&deep[99], &res), 10);
    CHECK_EQ_INT(res.truncated, 1);
    rq.max = 128;
    deep[70].refcnt = 0;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&deep[99], &res), PS_WALK_INCONSISTENT);
    deep[70].refcnt = 2;
    /* A walk that meets a frame again (seen_twice, frameseen.h) whether
     * it was remembered in the list (the walk's 10th frame) or the table
     * (its 50th): torn. */
    deep[0].back = (uintptr_t)&deep[90];
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&deep[99], &res), PS_WALK_INCONSISTENT);
    deep[0].back = (uintptr_t)&deep[50];
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&deep[99], &res), PS_WALK_INCONSISTENT);
    deep[0].back = 0;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&deep[99], &res), 100);
}

/*
 * A batch's copies (framebatch.h): four words of each frame, read through
 * a plan of their own.  Here the position field (4 bytes) is the last of
 * the frame's bytes read: its word starts 4 bytes before it, so the copy
 * still holds it where the plan says and no word is read past the
 * frame's bytes -- the frame ends where its page does, and a word from
 * the position itself would fault (outside a scope: the read fails).
 */
static void test_batch_words(void)
{
    uint8_t *map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    CHECK_EQ_INT(munmap(map + 4096, 4096), 0);
    static struct fake_code code;
    static struct fake_frame caller;
    struct fake_frame *f = (struct fake_frame *)(map + 4096 - sizeof *f);
    make_code(&code, 0, 0, 1);
    make_frame(&caller, NULL, &code);
    make_frame(f, &caller, &code);
    f->pad = 777;
    caller.pad = 555;
    struct ps_python py_pad = py;
    py_pad.L.fr_pos = offsetof(struct fake_frame, pad);   /* 28 of 32 bytes */
    struct walk_plan plan, copies;
    static struct frame_batch b;
    CHECK_EQ_INT(ps_walk_plan_init(&plan, &py_pad, NULL, NULL, 1), 0);
    batch_plan(&plan, &copies, &b);
    CHECK_EQ_INT(b.chain.word[3], 24);
    CHECK_EQ_INT(copies.fr_pos, 28);
    b.chain.max = 8;
    CHECK_EQ_INT(ps_read_chain_in_scope(&b.chain, (uintptr_t)f), 2);
    CHECK_EQ_INT(b.at[0], (uintptr_t)f);
    CHECK_EQ_INT(b.at[1], (uintptr_t)&caller);
    int32_t pos[2];
    uintptr_t back, codep;
    for (int k = 0; k < 2; k++)
        memcpy(&pos[k], (const uint8_t *)&b.buf[4 * k] + copies.fr_pos, sizeof pos[k]);
    memcpy(&back, (const uint8_t *)b.buf + copies.fr_back, sizeof back);
    memcpy(&codep, (const uint8_t *)b.buf + copies.fr_code, sizeof codep);
    CHECK_EQ_INT(pos[0], 777);
    CHECK_EQ_INT(pos[1], 555);
    CHECK_EQ_INT(back, (uintptr_t)&caller);
    CHECK_EQ_INT(codep, (uintptr_t)&code);
    CHECK_EQ_INT(b.buf[0], f->refcnt);
    /* At most max frames; none past the last readable one. */
    b.chain.max = 1;
    CHECK_EQ_INT(ps_read_chain_in_scope(&b.chain, (uintptr_t)f), 1);
    b.chain.max = 8;
    CHECK_EQ_INT(ps_read_chain_in_scope(&b.chain, (uintptr_t)(map + 4096)), 0);
    /* Outside a scope a record is one read of its bytes (one system call
     * on the syscall path, as a whole frame's read was): a record whose
     * bytes pass the page's end is unreadable even where the words taken
     * from it lie before. */
    struct ps_chain c = { .dst = b.buf, .at = b.at, .word = { 0, 8, 0, 8 }, .len = 32,
                          .link = 1, .max = 8 };
    CHECK_EQ_INT(ps_read_chain_in_scope(&c, (uintptr_t)(map + 4096 - 16)), 0);
    c.max = 1;
    CHECK_EQ_INT(ps_read_chain_in_scope(&c, (uintptr_t)(map + 4096 - 32)), 1);
    munmap(map, 4096);
}

/*
 * The code object's words (memread.h, ps_read_words_in_scope): the words
 * at the offsets given, from one record; outside a scope one read of the
 * record's bytes, so a record that passes a page's end is unreadable; in
 * the thread's own scope (ps_read_scope_held) a fault jumps to the
 * scope's point; a scope that has ended is never jumped to (the read goes
 * ps_read's way and fails).
 */
static void test_code_words(void)
{
    uint8_t *map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    CHECK_EQ_INT(munmap(map + 4096, 4096), 0);
    uint8_t *rec = map + 4096 - 128;
    for (int i = 0; i < 128; i++)
        rec[i] = (uint8_t)i;
    const uint32_t off[PS_WORDS] = { 0, 8, 16, 120, 4, 60, 64, 100, 112 };
    uint64_t w[PS_WORDS];
    CHECK(ps_read_scope_held() == NULL);
    CHECK_EQ_INT(ps_read_words_in_scope(w, (uintptr_t)rec, 128, off, NULL), 0);
    for (int i = 0; i < PS_WORDS; i++) {
        uint64_t want;
        memcpy(&want, rec + off[i], sizeof want);
        CHECK_EQ_INT(w[i], want);
    }
    /* One byte too many, or too few to hold a word, or a record below
     * the first page: unreadable. */
    CHECK_EQ_INT(ps_read_words_in_scope(w, (uintptr_t)rec + 1, 128, off, NULL), -1);
    CHECK_EQ_INT(ps_read_words_in_scope(w, (uintptr_t)rec, 7, off, NULL), -1);
    CHECK_EQ_INT(ps_read_words_in_scope(w, 0x800, 128, off, NULL), -1);

    ps_mem_enable_direct();
    int held = ps_mem_batch_begin();
    if (!held) {
        printf("test_code_words: no direct path here, scope part skipped\n");
        munmap(map, 4096);
        return;
    }
    static sigjmp_buf env;
    static volatile int jumped;
    static sigjmp_buf *volatile scope;
    jumped = 0;
    if (sigsetjmp(env, 0) == 0) {
        ps_read_scope(&env);
        scope = ps_read_scope_held();
        CHECK(scope == &env);
        CHECK_EQ_INT(ps_read_words_in_scope(w, (uintptr_t)rec, 128, off, scope), 0);
        CHECK_EQ_INT(w[3], 0x7f7e7d7c7b7a7978ull);
        /* The last word lies past the page's end: the loads fault. */
        const uint32_t past[PS_WORDS] = { 0, 0, 0, 0, 0, 0, 0, 0, 128 };
        ps_read_words_in_scope(w, (uintptr_t)rec, 136, past, scope);
        ps_read_scope_end();
    } else {
        ps_read_scope_end();
        jumped = 1;
    }
    CHECK_EQ_INT(jumped, 1);
    /* The scope ended: its handle is no longer one. */
    CHECK(ps_read_scope_held() == NULL);
    CHECK_EQ_INT(ps_read_words_in_scope(w, (uintptr_t)rec, 136, off, scope), -1);
    CHECK_EQ_INT(ps_read_words_in_scope(w, (uintptr_t)rec, 128, off, scope), 0);
    ps_mem_batch_end(held);
    munmap(map, 4096);
}

int main(void)
{
    CHECK_EQ_INT(ps_mem_init(), 0);
    py.code_type = (uintptr_t)&code_type;
    py.L = layout;

    static struct fake_str s_file, s_main, s_f, s_g, s_other;
    static struct fake_code c_main, c_f, c_g;
    static struct fake_frame fr[8];
    uintptr_t file = make_str(&s_file, "app.py");
    make_code(&c_main, make_str(&s_main, "<module>"), file, 1);
    make_code(&c_f, make_str(&s_f, "f"), file, 10);
    make_code(&c_g, make_str(&s_g, "g"), file, 20);
    /* <module> -> f -> g, innermost g */
    make_frame(&fr[0], NULL, &c_main);
    make_frame(&fr[1], &fr[0], &c_f);
    make_frame(&fr[2], &fr[1], &c_g);

    struct ps_codecache cc;
    struct ps_stacktab t;
    struct ps_symtab syms;
    CHECK_EQ_INT(ps_codecache_init(&cc, 64), 0);
    CHECK_EQ_INT(ps_symtab_init(&syms, 1000), 0);
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000, ps_frame(PS_SYM_STACKS_FULL, PS_LINE_NONE)), 0);
    uint64_t out[16], again[16];
    struct ps_walk_res res;
    const struct ps_walk_req rq = { .py = &py, .cc = &cc, .syms = &syms, .out = out, .max = 16 };
    struct ps_walk_req rq_again = rq, rq_two = rq;
    rq_again.out = again;
    rq_two.max = 2;

    /* A whole walk: innermost first, one function per code object. */
    int n = walk_from(rq, (uintptr_t)&fr[2], &res);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(res.truncated, 0);
    CHECK_EQ_INT(res.boot, 0);
    CHECK_EQ_INT(cc.misses, 3);
    CHECK_EQ_INT(out[0] >> 32, ps_sym_python(&syms, "g", "app.py"));
    CHECK_EQ_INT(out[1] >> 32, ps_sym_python(&syms, "f", "app.py"));
    CHECK_EQ_INT(out[2] >> 32, ps_sym_python(&syms, "<module>", "app.py"));

    /* Again: every code object comes from the cache. */
    CHECK_EQ_INT(walk_from(rq_again, (uintptr_t)&fr[2], &res), 3);
    CHECK_EQ_INT(cc.hits, 3);
    CHECK_EQ_INT(cc.misses, 3);
    CHECK(memcmp(out, again, 3 * sizeof out[0]) == 0);

    /* A new code object at the same address (other name object): the
     * cache must not answer with the old function. */
    make_code(&c_g, make_str(&s_other, "h"), file, 20);
    CHECK_EQ_INT(walk_from(rq_again, (uintptr_t)&fr[2], &res), 3);
    CHECK_EQ_INT(again[0] >> 32, ps_sym_python(&syms, "h", "app.py"));
    CHECK_EQ_INT(cc.misses, 4);

    /* Deeper than max: cut, and said so. */
    CHECK_EQ_INT(walk_from(rq_two, (uintptr_t)&fr[2], &res), 2);
    CHECK_EQ_INT(res.truncated, 1);

    /* A frame that points at itself is a torn read, not a stack. */
    make_frame(&fr[3], &fr[3], &c_f);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[3], &res), PS_WALK_INCONSISTENT);
    /* A freed frame object (reference count 0) is not followed. */
    make_frame(&fr[4], &fr[1], &c_g);
    fr[4].refcnt = 0;
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[4], &res), PS_WALK_INCONSISTENT);
    /* A caller that nothing holds but its evaluation (reference count 1)
     * has no callee: the frame walked before it returned, and the caller
     * was read after that, or was handed out again as another call's
     * innermost frame (its code's zombie frame or the free list) -- two
     * moments stitched into one stack.  Dropped as torn. */
    make_frame(&fr[6], &fr[7], &c_g);
    make_frame(&fr[7], &fr[0], &c_f);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[6], &res), PS_WALK_INCONSISTENT);
    fr[7].refcnt = 2;   /* held by its callee's f_back too: a stack */
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[6], &res), 3);
    /* A walk that meets a frame object again, every count right: the
     * thread returned and called again while the walk read, and its
     * frames came back one level deeper (a stitch whose caller has a
     * callee at its new place).  Here a loop g -> f -> g; live, the walk
     * goes on down the new chain, one frame more than the program has.
     * Not a stack deeper than max, cut: dropped as torn. */
    make_frame(&fr[6], &fr[7], &c_g);
    make_frame(&fr[7], &fr[6], &c_f);
    fr[7].refcnt = 2;
    CHECK_EQ_INT(fr[6].refcnt, 2);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[6], &res), PS_WALK_INCONSISTENT);
    /* Something that is not a code object where the code should be. */
    make_frame(&fr[5], &fr[1], (struct fake_code *)&s_file);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[5], &res), PS_WALK_INCONSISTENT);
    /* A frame pointer into nothing, or misaligned: unreadable. */
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)8, &res), PS_WALK_UNREADABLE);
    CHECK_EQ_INT(walk_from(rq, (uintptr_t)&fr[2] + 1, &res), PS_WALK_UNREADABLE);
    /* No frame: no Python on this thread. */
    CHECK_EQ_INT(walk_from(rq, 0, &res), 0);

    /* Aggregation of walked stacks: root first, identical ones counted once. */
    make_code(&c_g, make_str(&s_g, "g"), file, 20);
    n = walk_from(rq, (uintptr_t)&fr[2], &res);
    CHECK_EQ_INT(n, 3);
    uint64_t rooted[3] = { out[2], out[1], out[0] };
    uint32_t label = ps_sym_label(&syms, 42, "MainThread");
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(ps_stacktab_add(&t, label, rooted, 3, 1), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, label, rooted, 2, 2), 0);  /* <module>;f */
    CHECK_EQ_INT(t.used, 2);
    CHECK_EQ_INT(t.total, 5);
    char *text = render(&t, &syms);
    /* (lines off: a frame shows its function and file only) */
    CHECK_EQ_STR(text, "thread 42 (MainThread);<module> (app.py);f (app.py) 2\n"
                       "thread 42 (MainThread);<module> (app.py);f (app.py);g (app.py) 3\n");
    free(text);

    /* A cleared table renders empty and keeps counting afresh. */
    CHECK_EQ_INT(ps_stacktab_clear(&t), 0);
    text = render(&t, &syms);
    CHECK_EQ_STR(text, "");
    free(text);

    /* Asked for, each frame's address (asyncio: tasks_stacks.c) and its
     * entry mark: 3.9 runs every frame in an evaluation-loop call of its
     * own. */
    uintptr_t addrs[16];
    uint8_t entry[16];
    struct ps_walk_req rq_marks = rq;
    rq_marks.addrs = addrs;
    rq_marks.entry = entry;
    memset(entry, 7, sizeof entry);
    CHECK_EQ_INT(walk_from(rq_marks, (uintptr_t)&fr[2], &res), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(addrs[i], (uintptr_t)&fr[2 - i]);
        CHECK_EQ_INT(entry[i], 1);
    }

    test_codecache_bounds(file);
    test_codecache_sets();
    test_data_stack(file);
    test_span_blocks(file);
    test_codes_collide(file);
    test_walk_fault(&cc, &syms, &fr[2], &c_f);
    test_frame_batch(&cc, &syms, file);
    test_batch_words();
    test_code_words();

    ps_codecache_clear(&cc);
    ps_codecache_free(&cc);
    ps_stacktab_free(&t);
    ps_symtab_free(&syms);
    return check_failures != 0;
}
