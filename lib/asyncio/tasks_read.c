/*
 * tasks_read.c - asyncio objects read from raw memory (tasks_impl.h):
 * tasks, their loops and the threads those run on, and each suspended
 * task's coroutine chain.
 *
 * A suspended task's coroutine chain: its coroutine's frame (3.11+ embedded
 * in the coroutine object, before a PyFrameObject it points to) and what
 * that awaits (the top of its value stack while suspended in an await,
 * CPython's _PyGen_yf), down through coroutines, generators,
 * async_generator_asend and coroutine_wrapper objects to the future.
 *
 * A loop's thread (3.9-3.13): its _thread_id instance attribute, set by
 * run_forever (a pthread id).  3.14+: the thread whose list holds the task.
 *
 * Every object is recognised by its type before its fields are used, a
 * task must be pending, and each chain is bounded.
 */
#include <string.h>

#include "python/frames.h"
#include "memory/memread.h"
#include "python/pyobj.h"
#include "asyncio/tasks_impl.h"

#define TPF_HEAPTYPE (1ul << 9)
/* 3.14+: list links followed per tick, 16 per task read (so the window
 * rotates through lists of up to 16 x the limit). */
#define LIST_LINKS_PER_TASK 16
#define FUT_PENDING 0

enum akind { K_OTHER = 0, K_CORO, K_GEN, K_AGEN, K_ASEND, K_WRAPPER };

/* --- tasks ---------------------------------------------------------------- */

int ps_tasks_is_task_type(const struct ps_tasks *T, uintptr_t type)
{
    return type != 0 && (type == T->task_type || ps_type_derives(T->py, type, T->task_type));
}

/* Reads the task at addr into *t; 0, or -1 if it is not a pending task. */
static int read_task(struct ps_tasks *T, uintptr_t addr, struct ps_task *t)
{
    const struct ps_async_layout *A = &T->A;
    uint8_t snap[256];
    int32_t state;
    if (A->task_read > sizeof snap || !ps_tasks_is_task_type(T, ps_obj_type(T->py, addr)) ||
        ps_read(snap, addr, A->task_read) != 0)
        return -1;
    memcpy(&state, snap + A->fut_state, sizeof state);
    if (state != FUT_PENDING)
        return -1;
    *t = (struct ps_task){
        .addr = addr,
        .loop = ps_ptr_at(snap, A->fut_loop),
        .waiter = ps_ptr_at(snap, A->task_fut_waiter),
        .coro = ps_ptr_at(snap, A->task_coro),
        .name = ps_ptr_at(snap, A->task_name),
        .parent = -1,   /* no awaiter, and no loop, until linked */
        .loop_ix = -1,
    };
    if (A->tasks_kind == PS_ATASKS_THREAD_LISTS) {
        t->awaited_by = ps_ptr_at(snap, A->task_awaited_by);
        t->awaited_by_is_set = snap[A->task_awaited_by_is_set];
    } else {
        t->cb0 = ps_ptr_at(snap, A->fut_callback0);
        t->cbs = ps_ptr_at(snap, A->fut_callbacks);
    }
    /* A task being initialised (3.14+ lists it before its name is set)
     * is not one yet. */
    if (!ps_obj_ok(t->loop) || !ps_obj_ok(t->coro) || !ps_obj_ok(t->name))
        return -1;
    return 0;
}

void ps_tasks_add(struct ps_tasks *T, const uintptr_t *keys, int nk, int weak)
{
    for (int i = 0; i < nk && T->n < T->limit; i++) {
        uintptr_t addr = keys[i];
        if (weak) {
            if (ps_obj_type(T->py, addr) != T->py->weakref_type ||
                ps_read_ptr(addr + T->A.wr_object, &addr) != 0 || addr == T->py->none)
                continue;
        }
        if (read_task(T, addr, &T->t[T->n]) == 0)
            T->n++;
    }
}

/* Where a walk over all threads' task lists is: g counts the nodes over
 * all lists, budget the links left to follow. */
struct list_walk {
    uint64_t g;
    int budget;
};

/* The tasks of thread state ts's list (3.14+), those in this tick's
 * window [cursor, cursor + limit): the thread becomes an entry of loops[]
 * with its first task read.  w is advanced over the nodes.  Nodes outside
 * the window cost one read each. */
static void thread_tasks(struct ps_tasks *T, uintptr_t ts, uintptr_t node, unsigned long pth,
                         uintptr_t running, struct list_walk *w)
{
    const struct ps_async_layout *A = &T->A;
    uint64_t *g = &w->g;
    int *budget = &w->budget;
    uintptr_t head = ts + A->ts_tasks_head;
    int ix = -1;
    for (; node != head && node != 0 && *budget > 0; (*budget)--, (*g)++) {
        uintptr_t nn;
        if ((node & 7) || ps_read_ptr(node, &nn) != 0)
            break;
        if (*g >= T->cursor && T->n < T->limit &&
            read_task(T, node - A->task_node, &T->t[T->n]) == 0) {
            if (ix < 0 && T->nloops < PS_TASKS_LOOPS) {
                ix = T->nloops++;
                T->loops[ix].loop = ts;
                T->loops[ix].thread = pth;
                T->loops[ix].running = running;
                T->loops[ix].shown = 0;
            }
            T->t[T->n].loop_ix = ix;
            T->n++;
        }
        node = nn;
    }
}

/* 3.14+: each thread with tasks is one entry of loops[] (its running task
 * from the thread state).  Tasks of threads that exited (the
 * interpreter's list) are not running anywhere and are left out. */
void ps_tasks_collect_lists(struct ps_tasks *T, uintptr_t interp)
{
    const struct ps_python *py = T->py;
    const struct ps_async_layout *A = &T->A;
    uintptr_t ts;
    /* links followed, torn lists included; g: index of a node over all lists */
    struct list_walk w = { .g = 0, .budget = LIST_LINKS_PER_TASK * T->limit };
    if (ps_read_ptr(interp + py->L.is_threads_head, &ts) != 0)
        return;
    for (int nts = 0; ts != 0 && nts < 4096 && w.budget > 0; nts++) {
        uintptr_t next, pth, running, node;
        if (ps_read_ptr(ts + py->L.ts_next, &next) != 0 ||
            ps_read_ptr(ts + py->L.ts_thread_id, &pth) != 0 ||
            ps_read_ptr(ts + A->ts_running_task, &running) != 0 ||
            ps_read_ptr(ts + A->ts_tasks_head, &node) != 0)
            return;
        thread_tasks(T, ts, node, (unsigned long)pth, running, &w);
        ts = next;
    }
    /* Counted on the marker: the nodes seen but not read (beyond the link
     * budget, more may exist). */
    T->skipped = (int64_t)w.g > T->n ? (int64_t)w.g - T->n : 0;
    T->cursor = T->cursor + (uint64_t)T->limit < w.g ? T->cursor + (uint64_t)T->limit : 0;
}

/* --- loops ---------------------------------------------------------------- */

static int loop_index(struct ps_tasks *T, uintptr_t loop)
{
    for (int i = 0; i < T->nloops; i++)
        if (T->loops[i].loop == loop)
            return i;
    if (T->nloops == PS_TASKS_LOOPS)
        return -1;
    struct ps_aloop *l = &T->loops[T->nloops];
    uintptr_t v;
    uint64_t id;
    memset(l, 0, sizeof *l);
    l->loop = loop;
    /* _thread_id is None while the loop is not running: its tasks wait
     * for nothing we could attribute, and are left out. */
    if (ps_attr_get(T->py, loop, "_thread_id", &v) == 0 && ps_long_value(T->py, v, &id) == 0)
        l->thread = (unsigned long)id;
    return T->nloops++;
}

static int current_each(uintptr_t loop, uintptr_t task, void *ctx)
{
    struct ps_tasks *T = ctx;
    for (int i = 0; i < T->nloops; i++)
        if (T->loops[i].loop == loop)
            T->loops[i].running = task;
    return 0;
}

void ps_tasks_find_loops(struct ps_tasks *T)
{
    for (int i = 0; i < T->n; i++)
        T->t[i].loop_ix = loop_index(T, T->t[i].loop);
    ps_dict_each(T->py, T->current, 64, current_each, T);
}

/* --- coroutine chains ------------------------------------------------------ */

static int kind_of(struct ps_tasks *T, uintptr_t type)
{
    const struct ps_python *py = T->py;
    if (type == 0)
        return K_OTHER;
    if (type == py->coro_type)
        return K_CORO;
    if (type == py->gen_type)
        return K_GEN;
    if (type == py->agen_type)
        return K_AGEN;
    if (type == T->future_type || type == T->task_type)
        return K_OTHER;   /* what a task's chain ends in, most of the time */
    size_t slot = (type >> 4) % (sizeof T->kinds / sizeof T->kinds[0]);
    if (T->kinds[slot].type == type)
        return T->kinds[slot].kind;
    unsigned long flags;
    if (ps_read(&flags, type + py->L.tp_flags, sizeof flags) != 0)
        return K_OTHER;
    if (flags & TPF_HEAPTYPE)
        return K_OTHER;   /* may be freed and its address reused: not cached */
    int k = ps_type_named(py, type, "async_generator_asend") ? K_ASEND
            : ps_type_named(py, type, "coroutine_wrapper")   ? K_WRAPPER
                                                             : K_OTHER;
    /* Static types live as long as the interpreter. */
    T->kinds[slot].type = type;
    T->kinds[slot].kind = k;
    return k;
}

/* 3.14+: what a suspended frame awaits, yf_depth slots below its stack
 * pointer, a tagged _PyStackRef.  A stack pointer that cannot be this
 * frame's leaves it unknown (0), not the chain failed. */
static int yf_below_stackptr(struct ps_tasks *T, uintptr_t frame, uintptr_t *yf)
{
    const struct ps_async_layout *A = &T->A;
    uintptr_t sp, ref;
    if (ps_read_ptr(frame + A->fr_stacktop, &sp) != 0)
        return -1;
    if (sp <= frame || sp - frame > (1u << 20) || (sp & 7) ||
        ps_read_ptr(sp - 8 * (uintptr_t)A->yf_depth, &ref) != 0)
        return 0;
    *yf = ref & ~T->py->L.code_tag_mask;  /* tag bits off */
    return 0;
}

/* 3.11+: the frame is embedded in the generator, and gi_frame_state says
 * whether it is shown (created or suspended) and suspended in an await. */
static int embedded_frame(struct ps_tasks *T, uintptr_t g, uintptr_t *frame, uintptr_t *yf)
{
    const struct ps_async_layout *A = &T->A;
    int8_t st;
    int32_t top;
    if (ps_read(&st, g + A->gi_frame_state, 1) != 0)
        return -1;
    if (st < A->gi_show_lo || st > A->gi_show_hi)
        return 0;  /* executing (its frames are on a thread's stack) or done */
    *frame = g + A->gi_frame;
    if (st < A->gi_yf_lo || st > A->gi_yf_hi)
        return 0;
    if (A->yf_kind == PS_YF_STACKPTR)
        return yf_below_stackptr(T, *frame, yf);
    if (ps_read(&top, *frame + A->fr_stacktop, sizeof top) != 0)
        return -1;
    if (top >= 1 && top < 100000)
        return ps_read_ptr(*frame + A->fr_valuestack + 8 * (uintptr_t)(top - 1), yf);
    return 0;
}

/* 3.9: frame object f is suspended while f_stacktop is set, and awaits
 * f_stacktop[-1]. */
static int frame_object_stacktop(struct ps_tasks *T, uintptr_t f, uintptr_t *frame,
                                 uintptr_t *yf)
{
    const struct ps_async_layout *A = &T->A;
    uintptr_t top, base;
    if (ps_read_ptr(f + A->fr_stacktop, &top) != 0 ||
        ps_read_ptr(f + A->fr_valuestack, &base) != 0)
        return -1;
    if (top == 0)
        return 0;  /* executing */
    *frame = f;
    if (top > base && top - base < 800000)
        return ps_read_ptr(top - 8, yf);
    return 0;
}

/* 3.10: frame object f says its state in f_state, and a suspended one
 * awaits f_valuestack[f_stackdepth - 1]. */
static int frame_object_state(struct ps_tasks *T, uintptr_t f, uintptr_t *frame, uintptr_t *yf)
{
    const struct ps_async_layout *A = &T->A;
    int8_t st;
    int32_t depth;
    uintptr_t base;
    if (ps_read(&st, f + A->fr_state, 1) != 0)
        return -1;
    if (st >= 0)
        return 0;  /* executing or done */
    *frame = f;
    if (st != -1 /* FRAME_SUSPENDED */ || ps_read(&depth, f + A->fr_stacktop, sizeof depth) != 0 ||
        ps_read_ptr(f + A->fr_valuestack, &base) != 0)
        return 0;
    if (depth >= 1 && depth < 100000 && ps_obj_ok(base))
        return ps_read_ptr(base + 8 * (uintptr_t)(depth - 1), yf);
    return 0;
}

/* The frame of generator-like object g and what it awaits (0: nothing, or
 * it is not suspended in an await).  Returns 0 and *frame (0 when the
 * generator runs or has finished), or -1. */
static int gen_frame(struct ps_tasks *T, uintptr_t g, uintptr_t *frame, uintptr_t *yf)
{
    uintptr_t f;
    *frame = 0;
    *yf = 0;
    if (T->A.gi_frame_embedded)
        return embedded_frame(T, g, frame, yf);
    if (ps_read_ptr(g + T->A.gi_frame, &f) != 0)
        return -1;
    if (f == 0)
        return 0;  /* finished */
    return T->A.yf_kind == PS_YF_STACKTOP_PTR ? frame_object_stacktop(T, f, frame, yf)
                                              : frame_object_state(T, f, frame, yf);
}

/*
 * The suspended frames of the chain from coroutine coro, root first, into
 * w->out (at most w->max), each resolved with w's cc, syms and lines
 * (w->frame is not used: the chain starts at coro).  *first receives
 * coro's own frame address (also for a running coroutine: computed, not
 * read), *tg a TaskGroup the chain waits in.  Returns the number of frames
 * (0 if nothing could be read).
 */
static int coro_chain(struct ps_tasks *T, const struct ps_walk_req *w, uintptr_t coro,
                      uintptr_t *first, uintptr_t *tg)
{
    const struct ps_python *py = T->py;
    uint64_t *out = w->out;
    const int max = w->max;
    uintptr_t obj = coro;
    int n = 0;

    *first = 0;
    *tg = 0;
    if (T->A.gi_frame_embedded)
        *first = coro + T->A.gi_frame;
    else if (ps_read_ptr(coro + T->A.gi_frame, first) != 0)
        *first = 0;
    for (int steps = 0; steps < 2 * PS_TASKS_CORO_DEPTH && n < max && obj != 0; steps++) {
        int k = kind_of(T, ps_obj_type(py, obj));
        if (k == K_ASEND || k == K_WRAPPER) {
            if (ps_read_ptr(obj + T->A.wrapped, &obj) != 0)
                break;
            continue;
        }
        if (k == K_OTHER)
            break;  /* a future, a task, or something we do not follow */
        uintptr_t frame, yf;
        if (gen_frame(T, obj, &frame, &yf) != 0 || frame == 0)
            break;
        int is_tg = 0;
        uint64_t f;
        const struct ps_walk_req one = { .py = py, .cc = w->cc, .syms = w->syms,
                                         .lines = w->lines, .frame = frame, .max = 1,
                                         .out = &f };
        int r = ps_frame_one(&one, &is_tg);
        if (r < 0)
            break;
        if (r > 0)
            out[n++] = f;
        if (is_tg && *tg == 0) {
            uintptr_t self;
            if (ps_read_ptr(frame + py->L.fr_localsplus, &self) == 0 && ps_obj_ok(self))
                *tg = self;
        }
        obj = yf;
    }
    return n;
}

void ps_tasks_chains(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *tab,
                     int lines)
{
    size_t cap = (size_t)PS_TASKS_MAX * PS_TASKS_CORO_DEPTH;
    for (int i = 0; i < T->n; i++) {
        struct ps_task *t = &T->t[i];
        if (!ps_task_on_running_loop(T, t))
            continue;
        int max = PS_TASKS_CORO_DEPTH;
        if (cap - T->nfr < (size_t)max)
            break;
        t->fr_at = (uint32_t)T->nfr;
        const struct ps_walk_req w = { .py = T->py, .cc = cc, .syms = tab, .lines = lines,
                                       .max = max, .out = T->fr + T->nfr };
        t->nfr = (uint32_t)coro_chain(T, &w, t->coro, &t->coro_frame, &t->tg);
        T->nfr += t->nfr;
    }
}
