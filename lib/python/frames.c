/*
 * frames.c - where frames are walked.
 *
 * One loop serves every version; the layout says where the fields are and
 * how a frame's position turns into a line-table address:
 *   3.9/3.10  PyFrameObject chain via f_back; f_lasti is a byte offset (3.9)
 *             or a code-unit index (3.10, the table wants bytes: x2).
 *   3.11+     _PyInterpreterFrame chain via previous; the position is a
 *             pointer into the code's inline bytecode; frames whose owner
 *             says "C stack / interpreter entry" are shims and are skipped
 *             (3.12+), as is anything whose executable is not a code object
 *             (3.13+ entry frames hold None).  3.14+ tags f_executable in
 *             its low bits.
 *
 * The owning thread keeps running while we walk, so the chain can change
 * under us: every frame is copied in one read, every pointer is checked
 * before it is followed, code objects are recognised by their type, and a
 * walk that stops making sense is reported, never guessed at.  The walk is
 * bounded by max plus a margin for skipped shim frames, so a cycle built by
 * a torn read ends it.
 */
#include <string.h>

#include "python/frames.h"
#include "python/framecode.h"
#include "python/frameseen.h"
#include "python/framespan.h"
#include "python/walkplan.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "util/tickpath.h"

/* A pointer field the plan guarantees present (ps_walk_plan_init), within the
 * fr_read bytes copied: no "no such field" test per frame. */
static inline uintptr_t word_at(const uint8_t *snap, uint32_t off)
{
    uintptr_t v;
    memcpy(&v, snap + off, sizeof v);
    return v;
}

/* The owner byte says the frame is not a Python one (3.11+: C stack,
 * interpreter entry; never before 3.11, see plan_init). */
static inline int owner_native(const struct walk_plan *p, const uint8_t *fr)
{
    return (int8_t)fr[p->fr_owner] >= p->first_native;
}

/* Instruction address of a 3.11+ frame, in code units from the start of
 * the bytecode it executes; INT64_MIN if the pointer makes no sense.  The
 * pointer may be one unit before the first (a frame not yet started):
 * ip + 2 - base is then 0, and one compare bounds it on both sides.  Code
 * units are 2 bytes apart, so the halving is exact for any pointer the
 * interpreter makes. */
static inline int64_t interp_addr(const struct walk_plan *p, uintptr_t code, const uint8_t *fr,
                                  const struct ps_code_entry *ce)
{
    uintptr_t ip = word_at(fr, p->fr_pos);
    uintptr_t base = code + p->co_code_adaptive;
    int64_t n = ce->id.nunits;
    uint64_t from = ip + 2 - base;

    if (from < 2 * (uint64_t)n + 2)
        return (int64_t)(from / 2) - 1;
    if (p->tlbc)
        return ps_framecode_tlbc_addr(&p->py->L, code, fr, ip, n);
    return INT64_MIN;
}

/* One frame as copied: its address, its bytes (the plan's fr_read of
 * them), and which read of this walk copied them (0: not the walk's). */
struct frame_copy {
    uintptr_t at;
    const uint8_t *fr;
    uint64_t read;
    int8_t owner;       /* its owner byte (owner_native), read once */
};

/* What resolve makes of one frame. */
struct resolved {
    uint64_t frame;     /* the frame to report (resolve returned 1) */
    uintptr_t boot;     /* the frame's address if it is Thread._bootstrap_inner's, else kept */
    int taskgroup;      /* 1 if it is asyncio's TaskGroup.__aexit__ */
    uint64_t words;     /* its size on the data stack (framecode.c), 0 if not known */
};

/* Resolves the frame in, through the walk's code objects wc (NULL: none):
 * 1 with out->frame set, 0 for a frame that is not shown (shim, entry
 * frame, interpreter code), or a PS_WALK_ error; out's other fields as
 * they say.  Does not look at the frame's link.  Inlined into the walk:
 * it runs for every frame.  interp: a constant, 1 where the walk's
 * positions are known to be instruction pointers (walk_step). */
static inline __attribute__((always_inline)) int
resolve(const struct walk_plan *p, struct walk_codes *wc, const struct frame_copy *in,
        struct resolved *out, const int interp)
{
    const uint8_t *fr = in->fr;
    uint64_t w = 0;

    out->words = 0;
    if (in->owner >= p->first_native)
        return 0;
    uintptr_t code = word_at(fr, p->fr_code) & ~p->code_tag_mask;
    if (code == 0)
        return 0;
    struct ps_code_entry *ce = checked_code(wc, code, in->read, &w);
    if (ce == NULL) {
        int r = ps_framecode_read(p, wc, code, &ce, &w);
        if (r <= 0)
            return r;
    }
    out->words = w;
    if (ce->skip)
        return 0;
    if (ce->roles & PS_ROLE_THREAD_BOOT)
        out->boot = in->at;  /* its first local is the Thread object */
    out->taskgroup = (ce->roles & PS_ROLE_TASKGROUP_EXIT) != 0;

    int32_t line = PS_LINE_NONE;
    if (p->lines) {
        int64_t addr;
        if (interp || p->pos_kind == PS_POS_INSTR_PTR) {
            addr = interp_addr(p, code, fr, ce);
            if (addr == INT64_MIN)
                return PS_WALK_INCONSISTENT;
        } else {
            int32_t lasti;
            memcpy(&lasti, fr + p->fr_pos, sizeof lasti);
            addr = (p->pos_kind == PS_POS_LASTI_UNITS && lasti >= 0) ? 2 * (int64_t)lasti
                                                                     : lasti;
        }
        line = ps_code_line(ce, addr);
    }
    out->frame = ps_frame(ce->func, line);
    return 1;
}

/* 3.9/3.10: a frame object whose reference count is 0 was freed while we
 * looked (the thread returned from it).  It now sits on the free list,
 * which is chained through f_back, or is its code's zombie frame with a
 * stale f_back: following it would report dead frames as a stack. */
static inline int frame_freed(const uint8_t *fr)
{
    int64_t refcnt;
    memcpy(&refcnt, fr, sizeof refcnt);
    return refcnt <= 0;
}

/*
 * 3.9/3.10: is the frame object a caller, one whose callee was walked just
 * before it?  A running frame is held by whoever evaluates it (the
 * function call, or its generator) and by each frame whose f_back it is:
 * a caller's reference count is at least 2.
 *
 * Why it matters: a returning frame object goes to its code's zombie
 * frame or the free list, and the next call takes it back, usually one
 * level deeper.  A walk that read a frame, then followed its f_back after
 * the thread had returned and called again, finds the caller at its new
 * place and stitches two moments into one stack (13 frames of a function
 * that never recursed more than 12 deep).  The frame it finds is then
 * often the new innermost one, which nothing calls back to: a count of 1
 * says so.  A caller whose callee merely returned while we read it has 1
 * as well, and may have moved on to another line: that walk is torn too.
 * (A frame freed in between has 0: frame_freed.)  Either way walk_thread
 * tries again from a fresh thread state.  A stitch whose frame has a
 * callee again at its new place passes this check: seen_twice()
 * (frameseen.h).
 */
static inline int frame_holds_callee(const uint8_t *fr)
{
    int64_t refcnt;
    memcpy(&refcnt, fr, sizeof refcnt);
    return refcnt >= 2;
}

/* Marks frame i as the first one its evaluation-loop call ran. */
static void mark_entry(uint8_t *entry, int i)
{
    if (entry != NULL && i >= 0)
        entry[i] = 1;
}

/*
 * 3.11+: is the data-stack frame `above` (nearer the leaf) the one
 * `frame` called?  Frames on a thread's data stack are pushed and popped
 * in order: a frame is always allocated at the stack's top, which, while
 * `frame` is the newest data-stack frame, is frame + words (its size).
 * Frames in between on the chain live elsewhere (generator frames inside
 * their generator, 3.12's entry shims on the C stack) and do not move
 * the top (3.13+'s entry frames, 3.14+'s interpreter-owned ones, likewise
 * live on the C stack).  The one exception is a chunk boundary: when the callee did
 * not fit, it starts a new chunk (struct _PyStackChunk: previous, size,
 * top, then data), and the chunk it left recorded its top there.
 *
 * Why it matters: the walk reads one frame at a time while the thread
 * runs.  It can read a frame, follow its link, and find the caller's slot
 * already reused by the next call of the same caller -- a function of
 * another size -- when the frame it just read had returned in between.
 * The stack so built (worker;other;Condition.__exit__ where other never
 * calls it) is one the program never had.  A callee that is not exactly
 * where its caller's size puts it is such a mix, and the walk is dropped.
 */
static __attribute__((noinline)) int chunk_linked(uintptr_t above, uintptr_t frame,
                                                  uintptr_t end)
{
    struct { uintptr_t previous, size, top; } chunk, prev;

    /* A new chunk's first frame: its header is right before it. */
    if (above < sizeof chunk || ps_read(&chunk, above - sizeof chunk, sizeof chunk) != 0 ||
        chunk.previous == 0 || (chunk.previous & 7) != 0 ||
        ps_read(&prev, chunk.previous, sizeof prev) != 0)
        return 0;
    return frame > chunk.previous && frame < chunk.previous + prev.size &&
           chunk.previous + sizeof prev + 8 * prev.top == end;
}

static inline int data_stack_linked(uintptr_t above, uintptr_t frame, uint64_t words)
{
    uintptr_t end = frame + 8 * words;
    return above == end || chunk_linked(above, frame, end);
}

/*
 * One walk under way: where it is and what it has reported so far.  Its
 * copies (the plan, the span, walk_codes) are locals of walk_frames()
 * apart from it, passed on by address; the address of this one only
 * reaches the steps below, which are inlined, so its fields stay in
 * registers.
 */
struct walk {
    const struct walk_plan *p;
    const struct ps_walk_req *rq;
    struct span *sp;
    struct walk_codes *wc;      /* counts the walk's reads */
    struct walk_codes *codes;   /* wc where its slots can serve a frame, else NULL */
    struct seen *seen;          /* 3.9/3.10: the frame objects walked, else NULL */
    uintptr_t top;              /* the frame the walk began at */
    uintptr_t above;            /* the last data-stack frame walked, 3.11+ */
    uintptr_t boot;             /* the outermost Thread._bootstrap_inner frame, or 0 */
    int budget;                 /* links it may still follow (ps_walk_budget) */
    int n;                      /* frames reported */
    int truncated;
    int extras;                 /* rq->addrs or rq->entry is kept: one test a frame */
};

/* Sets the walk up at rq's first frame: 0, or PS_WALK_UNREADABLE for a
 * layout it cannot use.  The span starts empty without clearing its 32 KiB
 * buffer: only what a read filled is ever looked at. */
static inline int walk_begin(struct walk *w, struct walk_plan *plan, struct span *sp,
                             struct walk_codes *wc, struct seen *seen,
                             const struct ps_walk_req *rq)
{
    sp->lo = 0;
    sp->last = 0;
    sp->base = sp->buf;
    wc->reads = 0;
    memset(wc->code, 0, sizeof wc->code);
    int rc = ps_walk_plan_take(plan, rq);
    if (rc != 0)
        return rc;
    /* 3.9/3.10 read a frame alone, after any code object read before it:
     * no slot could serve one, so none is kept until the walk copies its
     * frames in batches (walk_frames). */
    sp->batch.i = sp->batch.n = 0;
    *w = (struct walk){ .p = plan, .rq = rq, .sp = sp, .wc = wc,
                        .codes = plan->interp ? wc : NULL, .top = rq->frame,
                        .seen = plan->objects ? seen : NULL,
                        .budget = ps_walk_budget(rq->max),
                        .extras = rq->addrs != NULL || rq->entry != NULL };
    if (plan->objects)
        seen_begin(seen);
    return 0;
}

/* Is the frame at frame (bytes fr, link back) one the chain can hold at
 * this point?  1 if it is a torn read: the walk must not go on.  interp:
 * a constant, 1 in the walk of 3.11+ frames (walk_frames), where the
 * frame-object checks cannot apply (no refcount, no seen table); objs: a
 * constant, 1 in the batched walk of 3.9/3.10 frames, where they always
 * do (w->seen is set wherever p->objects is). */
static inline int link_torn(const struct walk *w, uintptr_t frame, const uint8_t *fr,
                            uintptr_t back, const int interp, const int objs)
{
    const struct walk_plan *p = w->p;
    if (back == frame)
        return 1;
    if ((objs || (!interp && p->objects)) &&
        (frame_freed(fr) || (frame != w->top && !frame_holds_callee(fr)) ||
         seen_twice(w->seen, frame)))
        return 1;
    if (objs)
        return 0;
    /* 3.12+: every thread's chain ends in an entry frame owned by the C
     * stack, so a Python frame without a previous one is a frame being
     * initialised over a popped one while we looked (its previous is set
     * after it is zeroed): a torn walk, not a root. */
    return back == 0 && p->rootless_torn && !owner_native(p, fr);
}

/* A frame on the data stack (owner 0) must be where its callee (the last
 * data-stack frame walked) was allocated: 1 if it is not (a torn walk).
 * words != 0 only where the owner field exists (ps_walk_plan_init). */
static inline int data_stack_torn(struct walk *w, uintptr_t frame, int8_t owner,
                                  uint64_t words)
{
    if (words == 0 || owner != 0)
        return 0;
    if (w->above != 0 && !data_stack_linked(w->above, frame, words))
        return 1;
    w->above = frame;
    return 0;
}

/* Reports the Python frame at frame (bytes fr), resolved to one: 1, or 0
 * if max frames are reported already (another one beyond the limit: the
 * stack is cut). */
static inline int report_frame(struct walk *w, uintptr_t frame, const uint8_t *fr, uint64_t one)
{
    const struct ps_walk_req *rq = w->rq;
    if (w->n >= rq->max) {
        w->truncated = 1;
        return 0;
    }
    if (w->extras) {
        if (rq->addrs != NULL)
            rq->addrs[w->n] = frame;
        /* Native stacks (merge.c): which frame each evaluation-loop call
         * began with.  3.9/3.10 run each frame in a call of its own; 3.11
         * flags it (is_entry). */
        if (rq->entry != NULL)
            rq->entry[w->n] = w->p->objects ||
                              (w->p->fr_is_entry != PS_NOFIELD && fr[w->p->fr_is_entry] != 0);
    }
    rq->out[w->n++] = one;
    return 1;
}

/* Frames a batch or a span may copy ahead: no more than the walk may
 * read or report. */
static inline int batch_cap(const struct walk *w)
{
    int left = w->rq->max - w->n + 1;
    return left < w->budget + 1 ? left : w->budget + 1;
}

/* The bytes of the frame at, from the walk's batch (3.9/3.10), its span
 * (3.11+) or read now; NULL if unreadable.  *read_no: the read that
 * copied them.  What the walk may still read (batch_cap) is only worked
 * out when something is read.  interp, objs: as for link_torn. */
static inline __attribute__((always_inline)) const uint8_t *
frame_bytes(struct walk *w, uintptr_t at, uint64_t *read_no, const int interp, const int objs)
{
    if (objs) {
        const uint8_t *fr = batch_next(&w->sp->batch, at, read_no);
        return fr != NULL ? fr
                          : batch_fill(&w->sp->batch, w->wc, at, batch_cap(w), read_no);
    }
    /* 3.9/3.10 past their batches' reach, or macOS: read alone, inline
     * (the call cost a 10-frame 3.9 walk ~6 %). */
    if (!interp && !w->p->wide_ok)
        return frame_alone(w->p, w->sp, w->wc, at, read_no);
    const uint8_t *fr = span_holds(w->sp, at, read_no);
    if (fr != NULL)
        return fr;
    return frame_read(w->p, w->sp, w->wc, &(struct frame_at){ at, w->n, w->above, batch_cap(w) },
                      read_no);
}

/* One link of the chain: the frame at *frame copied, checked, resolved
 * and reported if shown.  1 with *frame moved on to its link, 0 if the
 * walk is cut here (its budget or max spent), or a PS_WALK_ error.
 * interp: a constant (walk_loop), 1 for 3.11+ frames located by
 * instruction pointers (every 3.11+ layout), whose walk keeps its code
 * objects from the start (w->codes is w->wc, walk_begin); objs: a
 * constant, 1 for 3.9/3.10 frames copied in batches (walk_frames), whose
 * walk keeps them from then on. */
static inline __attribute__((always_inline)) int walk_step(struct walk *w, uintptr_t *frame,
                                                           const int interp, const int objs)
{
    const struct walk_plan *p = w->p;
    const uintptr_t at = *frame;
    const uint8_t *fr;
    uint64_t fr_read;
    struct resolved res = { .boot = w->boot };

    if (w->budget-- <= 0) {
        w->truncated = 1;
        return 0;
    }
    if (!ps_frame_addr_ok(at) || (fr = frame_bytes(w, at, &fr_read, interp, objs)) == NULL)
        return PS_WALK_UNREADABLE;
    uintptr_t back = word_at(fr, p->fr_back);
    if (link_torn(w, at, fr, back, interp, objs))
        return PS_WALK_INCONSISTENT;
    /* 3.9/3.10 have no owner byte (plan_init: byte 0, never native). */
    const int8_t owner = objs ? 0 : (int8_t)fr[p->fr_owner];
    int r = resolve(p, interp || objs ? w->wc : w->codes,
                    &(struct frame_copy){ at, fr, fr_read, owner }, &res, interp);
    if (r < 0)
        return r;
    if (!objs && data_stack_torn(w, at, owner, res.words))
        return PS_WALK_INCONSISTENT;
    w->boot = res.boot;
    if (r > 0 && !report_frame(w, at, fr, res.frame))
        return 0;
    /* 3.12+: a C-stack shim starts every evaluation-loop call, so the
     * Python frame just before it was that call's first. */
    if (!objs && r == 0 && owner >= p->first_native)
        mark_entry(w->rq->entry, w->n - 1);
    *frame = back;
    return 1;
}

/* Walks from *frame until the chain ends (*frame 0), is cut (*frame
 * where it stopped) or fails: 0, or a PS_WALK_ error.  interp, objs:
 * constants, so that each kind of walk gets a loop of its own.  The
 * general loop stops where 3.9/3.10's batches begin (*frame where it
 * stopped, the walk not cut): past the first PS_BATCH_FROM frames
 * (framebatch.h says why). */
static inline __attribute__((always_inline)) int walk_loop(struct walk *w, uintptr_t *frame,
                                                           const int interp, const int objs)
{
    while (*frame != 0) {
        if (!interp && !objs && w->n >= PS_BATCH_FROM && w->p->batch)
            return 0;
        int rc = walk_step(w, frame, interp, objs);
        if (rc <= 0)
            return rc < 0 ? rc : 0;
    }
    return 0;
}

/* The walk proper: returns the frames reported, with *res filled, or a
 * PS_WALK_ error (*res untouched).  Out of line: kept apart from
 * ps_walk()'s sigsetjmp, so that the compiler optimises it as an ordinary
 * function. */
PS_TICK_PATH static __attribute__((noinline)) int walk_frames(const struct ps_walk_req *rq,
                                                 struct ps_walk_res *res)
{
    struct walk_plan plan;
    struct span sp;
    struct walk_codes wc;
    struct seen seen;
    struct walk w;
    uintptr_t frame = rq->frame;

    int rc = walk_begin(&w, &plan, &sp, &wc, &seen, rq);
    if (rc != 0)
        return rc;
    /* Every 3.11+ layout gives instruction pointers; one that did not
     * would take the general loop. */
    if (plan.interp && plan.pos_kind == PS_POS_INSTR_PTR) {
        rc = walk_loop(&w, &frame, 1, 0);
    } else {
        rc = walk_loop(&w, &frame, 0, 0);
        /* 3.9/3.10 from their batches on: the walk's code objects kept,
         * to serve each batch's later frames. */
        if (rc == 0 && frame != 0 && !w.truncated && plan.batch) {
            struct walk_plan copies;
            batch_plan(&plan, &copies, &sp.batch);
            w.p = &copies;
            w.codes = &wc;
            rc = walk_loop(&w, &frame, 0, 1);
        }
    }
    if (rc < 0)
        return rc;
    /* The outermost frame began the outermost call. */
    if (frame == 0)
        mark_entry(rq->entry, w.n - 1);
    res->n = w.n;
    res->truncated = w.truncated;
    res->boot = w.boot;
    return w.n;
}

/*
 * One recovery point per walk.  The walk's own reads of the
 * frames (frame_read, 3.9/3.10's chain reads: batch_fill) and of the
 * code objects (ps_framecode_read) are the scope's reads
 * (ps_read_in_scope, ps_read_chain_in_scope, ps_read_words_in_scope, with
 * the scope the plan took): a fault in one of them jumps
 * here and the walk is reported unreadable, exactly what that read's
 * -1 would have led to (a failed frame or code object read ends the walk
 * so), without a sigsetjmp per read.  The chunk headers' reads, rare, are
 * plain ps_read()s: a failed one makes the walk inconsistent, not
 * unreadable, and stays so.
 *
 * Why jumping out of the middle of walk_frames() is sound: at the moment
 * of such a fault the thread is inside one of those reads, called
 * from the walk, and everything the walk has changed since this point is
 * its own (the plan, the span, walk_codes, struct walk, on its stack) or
 * the caller's output (out, addrs, entry), which a walk that fails leaves
 * undefined and walk_thread() discards or rewrites on its retry; *res is
 * only written once the walk has ended without a fault.
 * What is shared -- the code cache and the symbol table -- is only changed
 * inside ps_code_resolve_words(), and no scoped read runs there: its own
 * reads (refill: names, line table) are plain ps_read()s that recover by
 * themselves, as does the 3.14t bytecode lookup (ps_framecode_tlbc_addr).
 * Outside it the walk writes the cache only by single stores made
 * between its reads, never during one: a hit's recency byte
 * (ps_code_hit), a line memo (ps_code_line), the hit count.
 * No lock is taken and nothing is allocated by the walk outside
 * ps_code_resolve_words().
 * So a jump never leaves shared state half-updated; what it abandons is
 * the walk.  A change that makes the walk write shared state outside
 * ps_code_resolve_words but by such stores, or call a scoped read from
 * inside it, breaks this.
 */
PS_TICK_PATH int ps_walk(const struct ps_walk_req *rq, struct ps_walk_res *res)
{
    sigjmp_buf env;
    *res = (struct ps_walk_res){ .n = 0 };
    if (sigsetjmp(env, 0) != 0) {
        ps_read_scope_end();
        res->error = PS_WALK_UNREADABLE;
        return res->error;
    }
    ps_read_scope(&env);
    int n = walk_frames(rq, res);
    ps_read_scope_end();
    if (n < 0)
        res->error = n;
    return n;
}

int ps_frame_one(const struct ps_walk_req *rq, int *taskgroup)
{
    uintptr_t frame = rq->frame;
    struct walk_plan plan;
    uint8_t fr[512];
    struct resolved res = { .boot = 0 };

    int rc = ps_walk_plan_init(&plan, rq->py, rq->cc, rq->syms, rq->lines);
    if (rc != 0)
        return rc;
    if (!ps_frame_addr_ok(frame) || ps_read(fr, frame, plan.fr_read) != 0)
        return PS_WALK_UNREADABLE;
    if (plan.objects && frame_freed(fr))
        return PS_WALK_INCONSISTENT;
    int r = resolve(&plan, NULL, &(struct frame_copy){ frame, fr, 0, (int8_t)fr[plan.fr_owner] },
                    &res, 0);
    *taskgroup = res.taskgroup;
    if (r > 0)
        *rq->out = res.frame;
    return r;
}
