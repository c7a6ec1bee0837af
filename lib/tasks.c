/*
 * tasks.c - asyncio tasks, found and walked in raw memory (see tasks.h).
 *
 * Finding the tasks (3.9-3.13), without running Python:
 *   interp->modules            the modules dict (layout.h is_modules)
 *   ["_asyncio"]               the C accelerator; asyncio's module-level
 *                              task registries ARE this module's objects
 *   md_dict["Task"]            the Task type: every task must be of it or
 *                              derive from it (validates each object)
 *   ["_all_tasks"]             3.9-3.11: WeakSet of every task
 *   ["_scheduled_tasks"]       3.12/3.13: WeakSet of scheduled tasks ...
 *   ["_eager_tasks"]           ... and a set of eagerly running ones
 *   ["_current_tasks"]         dict loop -> the task it runs right now
 *   WeakSet .data              instance attribute: a set of weakrefs,
 *                              each's wr_object the task (None once dead)
 *   loop ._thread_id           instance attribute set by run_forever: the
 *                              thread (pthread id) the loop runs on
 * Without _asyncio (asyncio's pure-Python fallback) tasks are plain Python
 * objects: refused with one note.
 *
 * 3.14+ keeps no task set: every native task is on a linked list of the
 * thread that created it (_PyThreadStateImpl.asyncio_tasks_head, through
 * TaskObj.task_node), and each thread state holds its running task.  The
 * offsets come from _asyncio's _AsyncioDebug table (debug_table()), and a
 * task records who awaits it (task_awaited_by: a task or a set), which
 * replaces the fut_waiter/gather/TaskGroup reading below.
 *
 * Which task awaits which (3.9-3.13).  A suspended task's fut_waiter is the future it
 * waits on: another task (await task), or gather's _GatheringFuture whose
 * _children lists the tasks.  A task in `async with TaskGroup()` waits on a
 * plain future inside TaskGroup.__aexit__, whose first local is the group
 * and whose _tasks set holds the children.  shield() and (3.9-3.11)
 * wait_for() make the awaiting task wait on a private plain future that
 * only the inner task's done-callbacks know: shield's _inner_done_callback
 * holds it in a closure cell, wait_for's functools.partial(_release_waiter,
 * waiter) in its args.  A callback's cells or args equal to another
 * task's fut_waiter make that task the awaiter (link_callbacks).
 *
 * A suspended task's coroutine chain: its coroutine's frame (3.11+ embedded
 * in the coroutine object, before a PyFrameObject it points to) and what
 * that awaits (the top of its value stack while suspended in an await,
 * CPython's _PyGen_yf), down through coroutines, generators,
 * async_generator_asend and coroutine_wrapper objects to the future.
 *
 * Tasks finish and are freed while we read: every object is recognised by
 * its type before its fields are used, a task must be pending, each chain
 * is bounded, and anything that does not hold together is left out, never
 * guessed.  At most PS_TASKS_MAX tasks are read per tick (64 when reads are
 * system calls), rotating through the set or lists from tick to tick; the
 * others are counted on a marker stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "memread.h"
#include "message.h"
#include "pyobj.h"
#include "platform.h"
#include "pystr.h"
#include "tasks.h"

#define TPF_HEAPTYPE (1ul << 9)
/* Looking for asyncio (a scan of the modules dict, ~20 us with direct
 * reads): every 10 ms at first, then less often, up to once a second, so a
 * program that never imports asyncio (or reads through system calls, ~100x
 * dearer) pays next to nothing. */
#define SEARCH_FIRST_NS 10000000ull
#define SEARCH_MAX_NS 1000000000ull
/* Tasks read per tick when reads are system calls (memread.h): a tick of
 * 1024 tasks would then take tens of milliseconds. */
#define PS_TASKS_MAX_SLOW 64
/* 3.14+: list links followed per tick, 16 per task read (so the window
 * rotates through lists of up to 16 x the limit). */
#define LIST_LINKS_PER_TASK 16
#define MARKS 2048                     /* power of two */
#define MARK_TEXT 200
#define FUT_PENDING 0

enum akind { K_OTHER = 0, K_CORO, K_GEN, K_AGEN, K_ASEND, K_WRAPPER };

struct ps_task {
    uintptr_t addr, loop, coro, waiter, name;
    uintptr_t cb0, cbs;      /* 3.9-3.13: done-callbacks (callback0, the list) */
    uintptr_t coro_frame;    /* the coroutine's own frame, 0 if unknown */
    uintptr_t tg;            /* a TaskGroup its chain waits in, or 0 */
    uintptr_t awaited_by;    /* 3.14+: the task (or set of them) awaiting it */
    uint8_t awaited_by_is_set;
    int32_t parent;          /* the task awaiting this one, or -1 */
    int32_t loop_ix;         /* in loops[], or -1 */
    uint32_t fr_at, nfr;     /* its suspended frames (root first) in fr[] */
    uint8_t has_child;
};

struct ps_taskref {
    uintptr_t addr;
    int ix;
};

struct ps_aloop {
    uintptr_t loop;
    unsigned long thread;    /* 0: not running */
    uintptr_t running;       /* its current task, or 0 */
};

/* A task's marker text, made once from its name and coroutine: later
 * ticks intern the remembered text (a hash probe, no reads). */
struct mark {
    uintptr_t task, name, coro;
    char text[MARK_TEXT];
};

struct ps_tasks {
    struct ps_python py;
    struct ps_async_layout A;
    int state;               /* 0 looking for asyncio, 1 found, 2 gave up */
    uint64_t next_search, search_every;
    int limit;               /* tasks read this tick */
    uintptr_t interp, task_type, future_type, all_set, eager_set, current;
    uint64_t cursor;
    struct ps_task *t;
    int n;
    int64_t skipped;         /* tasks not read this tick */
    struct ps_taskref *refs; /* tasks sorted by address */
    struct ps_taskref *wrefs; /* tasks waiting on a plain future, by its address */
    int nw;
    uintptr_t *keys;
    uint64_t *fr;
    size_t nfr;
    struct ps_aloop loops[PS_TASKS_LOOPS];
    int nloops;
    struct { uintptr_t type; int kind; } kinds[16];
    struct mark marks[MARKS];
    uint32_t more_func;
};

int ps_is_taskgroup_exit(const char *name, const char *file)
{
    static const char tail[] = "asyncio/taskgroups.py";
    size_t n = strlen(file), t = sizeof tail - 1;
    return n >= t && strcmp(file + n - t, tail) == 0 && strcmp(name, "TaskGroup.__aexit__") == 0;
}

struct ps_tasks *ps_tasks_new(const struct ps_python *py)
{
    char why[160];
    struct ps_async_layout A;
    if (ps_async_layout(&py->L, &A, why, sizeof why) != 0 || py->dict_type == 0 ||
        py->set_type == 0 || py->str_type == 0 || py->coro_type == 0 ||
        (py->L.minor <= 13 && py->weakref_type == 0)) {
        if (py->dict_type == 0 || py->set_type == 0)
            snprintf(why, sizeof why, "asyncio tasks are not attributed: builtin types not found");
        ps_say("PYSAMPLE_ASYNC: %s; sampling threads only", why);
        return NULL;
    }
    struct ps_tasks *T = calloc(1, sizeof *T);
    if (T == NULL)
        return NULL;
    T->py = *py;
    T->A = A;
    T->t = calloc(PS_TASKS_MAX, sizeof *T->t);
    T->refs = calloc(PS_TASKS_MAX, sizeof *T->refs);
    T->wrefs = calloc(PS_TASKS_MAX, sizeof *T->wrefs);
    T->keys = calloc(PS_TASKS_MAX, sizeof *T->keys);
    T->fr = calloc((size_t)PS_TASKS_MAX * PS_TASKS_CORO_DEPTH, sizeof *T->fr);
    if (T->t == NULL || T->refs == NULL || T->wrefs == NULL || T->keys == NULL ||
        T->fr == NULL) {
        free(T->t);
        free(T->refs);
        free(T->wrefs);
        free(T->keys);
        free(T->fr);
        free(T);
        return NULL;
    }
    return T;
}

/* --- finding asyncio ---------------------------------------------------- */

static int module_dict(const struct ps_tasks *T, uintptr_t mod, uintptr_t *dict)
{
    const struct ps_python *py = &T->py;
    return ps_type_named(py, ps_obj_type(py, mod), "module") &&
                   ps_read_ptr(mod + T->A.md_dict, dict) == 0 && ps_obj_type(py, *dict) == py->dict_type
               ? 0
               : -1;
}

/* The set inside a WeakSet instance (its data attribute). */
static uintptr_t weakset_data(const struct ps_python *py, uintptr_t ws)
{
    uintptr_t data;
    if (ps_attr_get(py, ws, "data", &data) != 0 || ps_obj_type(py, data) != py->set_type)
        return 0;
    return data;
}

/*
 * 3.14+: _asyncio's own description (_AsyncioDebug, "_Py_AsyncioDebug" in
 * 3.15), in the section ".AsyncioDebug" of the extension module's file
 * (its __file__) or, built in, of the image holding _PyRuntime:
 *   asyncio_task_object   size, task_name, task_awaited_by, task_is_task,
 *                         task_awaited_by_is_set, task_coro, task_node
 *   asyncio_interpreter   size, asyncio_tasks_head
 *   asyncio_thread_state  size, running_loop, running_task, tasks_head
 * The Task's other fields are placed by their C declaration relative to
 * these (FutureObj_HEAD: ..., awaited_by, state, is_task, awaited_by_is_set;
 * TaskObj: ..., fut_waiter, coro, name, context, node): those relations
 * are checked, so a build laid out otherwise is refused, not misread.
 */
static int debug_table(struct ps_tasks *T, uintptr_t mod_dict)
{
    const struct ps_python *py = &T->py;
    char file[4096];
    const char *path = NULL;
    uintptr_t f, addr;
    size_t size;
    uint64_t v[13];
    if (ps_dict_get(py, mod_dict, "__file__", &f) == 0 && ps_obj_type(py, f) == py->str_type &&
        ps_str_read(&py->L, f, file, sizeof file) > 0)
        path = file;
    if (ps_image_section(path, py->runtime, ".AsyncioDebug", &addr, &size) != 0 ||
        size < sizeof v || ps_read(v, addr, sizeof v) != 0) {
        ps_say("PYSAMPLE_ASYNC: asyncio's _AsyncioDebug table was not found; "
               "tasks are not attributed, sampling threads only");
        T->state = 2;
        return -1;
    }
    struct ps_async_layout *A = &T->A;
    uint64_t tsize = v[0], name = v[1], awaited = v[2], is_task = v[3], is_set = v[4],
             coro = v[5], node = v[6], ts_size = v[9], running = v[11], head = v[12];
    uint32_t h = ps_ob_head(&py->L);   /* FutureObj_HEAD: 10 pointers, then awaited_by */
    if (tsize < 64 || tsize > 1024 || name + 8 > tsize || node + 16 > tsize ||
        awaited != h + 10 * 8 || is_task != awaited + 12 || is_set != is_task + 1 ||
        coro != name - 8 || node != name + 16 || ts_size < 256 || ts_size > (1u << 20) ||
        running + 8 > ts_size || head + 16 > ts_size) {
        ps_say("PYSAMPLE_ASYNC: asyncio's _AsyncioDebug table does not describe the Task "
               "this version of libpysample knows; tasks are not attributed");
        T->state = 2;
        return -1;
    }
    A->fut_loop = h;
    A->fut_state = (uint32_t)awaited + 8;
    A->task_awaited_by = (uint32_t)awaited;
    A->task_awaited_by_is_set = (uint32_t)is_set;
    A->task_fut_waiter = (uint32_t)coro - 8;
    A->task_coro = (uint32_t)coro;
    A->task_name = (uint32_t)name;
    A->task_node = (uint32_t)node;
    A->task_read = (uint32_t)node + 16;
    A->ts_running_task = (uint32_t)running;
    A->ts_tasks_head = (uint32_t)head;
    A->ts_impl_size = (uint32_t)ts_size;
    return 0;
}

static void search(struct ps_tasks *T, uintptr_t interp, uint64_t now)
{
    const struct ps_python *py = &T->py;
    uintptr_t modules, mod, d, v;

    T->search_every = T->search_every == 0 ? SEARCH_FIRST_NS
                      : T->search_every >= SEARCH_MAX_NS / 2 ? SEARCH_MAX_NS
                                                            : 2 * T->search_every;
    T->next_search = now + T->search_every;
    if (ps_read_ptr(interp + py->L.is_modules, &modules) != 0 ||
        ps_obj_type(py, modules) != py->dict_type)
        return;
    if (ps_dict_get(py, modules, "_asyncio", &mod) != 0 || module_dict(T, mod, &d) != 0) {
        /* asyncio imported its tasks module without the accelerator */
        if (ps_dict_get(py, modules, "asyncio.tasks", &mod) == 0) {
            ps_say("PYSAMPLE_ASYNC: asyncio runs without its C accelerator (_asyncio); "
                   "tasks are not attributed, sampling threads only");
            T->state = 2;
        }
        return;
    }
    if (ps_dict_get(py, d, "Task", &v) != 0 ||
        !ps_type_named(py, v, "_asyncio.Task"))
        return;
    T->task_type = v;
    if (ps_dict_get(py, d, "Future", &v) != 0 || !ps_type_named(py, v, "_asyncio.Future"))
        return;
    T->future_type = v;
    if (T->A.tasks_kind == PS_ATASKS_THREAD_LISTS) {
        /* the running task is in each thread state: no _current_tasks */
        if (debug_table(T, d) == 0) {
            T->interp = interp;
            T->state = 1;
        }
        return;
    }
    if (ps_dict_get(py, d, "_current_tasks", &v) != 0 || ps_obj_type(py, v) != py->dict_type)
        return;
    T->current = v;
    const char *all = T->A.tasks_kind == PS_ATASKS_ALL ? "_all_tasks" : "_scheduled_tasks";
    if (ps_dict_get(py, d, all, &v) != 0 || (T->all_set = weakset_data(py, v)) == 0)
        return;
    T->eager_set = 0;
    if (T->A.tasks_kind == PS_ATASKS_SCHEDULED_EAGER &&
        (ps_dict_get(py, d, "_eager_tasks", &v) != 0 || ps_obj_type(py, v) != py->set_type))
        return;
    if (T->A.tasks_kind == PS_ATASKS_SCHEDULED_EAGER)
        T->eager_set = v;
    T->interp = interp;
    T->state = 1;
}

/* --- reading one task --------------------------------------------------- */

static int is_task_type(struct ps_tasks *T, uintptr_t type)
{
    return type != 0 && (type == T->task_type || ps_type_derives(&T->py, type, T->task_type));
}

/* Reads the task at addr into *t; 0, or -1 if it is not a pending task. */
static int read_task(struct ps_tasks *T, uintptr_t addr, struct ps_task *t)
{
    const struct ps_async_layout *A = &T->A;
    uint8_t snap[256];
    int32_t state;
    if (A->task_read > sizeof snap || !is_task_type(T, ps_obj_type(&T->py, addr)) ||
        ps_read(snap, addr, A->task_read) != 0)
        return -1;
    memcpy(&state, snap + A->fut_state, sizeof state);
    if (state != FUT_PENDING)
        return -1;
    memset(t, 0, sizeof *t);
    t->addr = addr;
    t->loop = ps_ptr_at(snap, A->fut_loop);
    t->waiter = ps_ptr_at(snap, A->task_fut_waiter);
    t->coro = ps_ptr_at(snap, A->task_coro);
    t->name = ps_ptr_at(snap, A->task_name);
    t->parent = -1;
    t->loop_ix = -1;
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

static int by_addr(const void *a, const void *b)
{
    const struct ps_taskref *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* refs[] sorted by address, for find_task. */
static void sort_tasks(struct ps_tasks *T)
{
    for (int i = 0; i < T->n; i++) {
        T->refs[i].addr = T->t[i].addr;
        T->refs[i].ix = i;
    }
    qsort(T->refs, (size_t)T->n, sizeof T->refs[0], by_addr);
}

/* Index of the task at addr in this tick's snapshot, or -1. */
static int find_task(const struct ps_tasks *T, uintptr_t addr)
{
    int lo = 0, hi = T->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uintptr_t a = T->refs[mid].addr;
        if (a == addr)
            return T->refs[mid].ix;
        if (a < addr)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Adds the tasks among keys (tasks, or weakrefs to them). */
static void add_tasks(struct ps_tasks *T, const uintptr_t *keys, int nk, int weak)
{
    for (int i = 0; i < nk && T->n < T->limit; i++) {
        uintptr_t addr = keys[i];
        if (weak) {
            if (ps_obj_type(&T->py, addr) != T->py.weakref_type ||
                ps_read_ptr(addr + T->A.wr_object, &addr) != 0 || addr == T->py.none)
                continue;
        }
        if (read_task(T, addr, &T->t[T->n]) == 0)
            T->n++;
    }
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
    if (ps_attr_get(&T->py, loop, "_thread_id", &v) == 0 && ps_long_value(&T->py, v, &id) == 0)
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

/* --- coroutine chains ------------------------------------------------------ */

static int kind_of(struct ps_tasks *T, uintptr_t type)
{
    const struct ps_python *py = &T->py;
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

/* The frame of generator-like object g and what it awaits (0: nothing, or
 * it is not suspended in an await).  Returns 0 and *frame (0 when the
 * generator runs or has finished), or -1. */
static int gen_frame(struct ps_tasks *T, uintptr_t g, uintptr_t *frame, uintptr_t *yf)
{
    const struct ps_async_layout *A = &T->A;
    *frame = 0;
    *yf = 0;
    if (A->gi_frame_embedded) {
        int8_t st;
        int32_t top;
        if (ps_read(&st, g + A->gi_frame_state, 1) != 0)
            return -1;
        if (st < A->gi_show_lo || st > A->gi_show_hi)
            return 0;  /* executing (its frames are on a thread's stack) or done */
        *frame = g + A->gi_frame;
        if (st < A->gi_yf_lo || st > A->gi_yf_hi)
            return 0;
        if (A->yf_kind == PS_YF_STACKPTR) {
            uintptr_t sp, ref;
            if (ps_read_ptr(*frame + A->fr_stacktop, &sp) != 0)
                return -1;
            if (sp <= *frame || sp - *frame > (1u << 20) || (sp & 7) ||
                ps_read_ptr(sp - 8 * (uintptr_t)A->yf_depth, &ref) != 0)
                return 0;
            *yf = ref & ~T->py.L.code_tag_mask;  /* a _PyStackRef: tag bits off */
            return 0;
        }
        if (ps_read(&top, *frame + A->fr_stacktop, sizeof top) != 0)
            return -1;
        if (top >= 1 && top < 100000)
            return ps_read_ptr(*frame + A->fr_valuestack + 8 * (uintptr_t)(top - 1), yf);
        return 0;
    }
    uintptr_t f;
    if (ps_read_ptr(g + A->gi_frame, &f) != 0)
        return -1;
    if (f == 0)
        return 0;  /* finished */
    if (A->yf_kind == PS_YF_STACKTOP_PTR) {
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

/*
 * The suspended frames of the chain from coroutine coro, root first, into
 * out (at most max).  *first receives coro's own frame address (also for a
 * running coroutine: computed, not read), *tg a TaskGroup the chain waits
 * in.  Returns the number of frames (0 if nothing could be read).
 */
static int coro_chain(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *tab,
                      int lines, uintptr_t coro, uint64_t *out, int max, uintptr_t *first,
                      uintptr_t *tg)
{
    const struct ps_python *py = &T->py;
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
        int r = ps_frame_one(py, cc, tab, lines, frame, &f, &is_tg);
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

/* --- links between tasks ---------------------------------------------------- */

static void link_child(struct ps_tasks *T, int parent, uintptr_t child)
{
    int c = find_task(T, child);
    if (c < 0 || c == parent || T->t[c].parent >= 0)
        return;
    T->t[c].parent = parent;
    T->t[parent].has_child = 1;
}

/* Links the tasks that future fut stands for to task i: fut itself, or
 * the children of a gather (nested gathers followed depth levels down). */
static void link_future(struct ps_tasks *T, int i, uintptr_t fut, int depth)
{
    const struct ps_python *py = &T->py;
    uintptr_t items[64], v;
    if (!ps_obj_ok(fut))
        return;
    uintptr_t ft = ps_obj_type(py, fut);
    if (ft == T->future_type)
        return;  /* a plain future: a sleep, I/O, a lock */
    if (is_task_type(T, ft)) {
        link_child(T, i, fut);
    } else if (depth > 0 && ps_type_named(py, ft, "_GatheringFuture") &&
               ps_attr_get(py, fut, "_children", &v) == 0) {
        int n = ps_list_items(py, v, items, 64);
        for (int k = 0; k < n; k++)
            link_future(T, i, items[k], depth - 1);
    }
}

static void link_children(struct ps_tasks *T, int i)
{
    const struct ps_python *py = &T->py;
    struct ps_task *t = &T->t[i];
    uintptr_t items[64], v;

    if (t->waiter != 0)
        link_future(T, i, t->waiter, 4);
    if (t->tg != 0 && ps_attr_get(py, t->tg, "_tasks", &v) == 0) {
        uint64_t cursor = 0;
        int64_t used;
        int n = ps_set_keys(py, v, items, 64, &cursor, &used);
        for (int k = 0; k < n; k++)
            link_child(T, i, items[k]);
    }
}

/*
 * shield() and wait_for() (3.9-3.13).  The awaiting task waits on a plain
 * future private to them, which only the inner task's done-callbacks know:
 *   shield:          _inner_done_callback, a function whose closure cell
 *                    holds the outer future (before 3.14)
 *   wait_for (<3.12): functools.partial(_release_waiter, waiter)
 * So: the tasks waiting on a plain future, sorted by that future
 * (wrefs[]); then, for each task no awaiter was found for, the objects its
 * callbacks hold (closure cells, a partial's args) looked up there.  Only
 * a function, cell, tuple or functools.partial recognised by its type is
 * read; at most CB_MAX callbacks of CB_REFS objects each, so a task costs a
 * few reads.  A match needs both tasks on one loop; anything else is no
 * link.
 */
#define CB_MAX 8
#define CB_REFS 8

static int waiter_index(const struct ps_tasks *T, uintptr_t fut)
{
    int lo = 0, hi = T->nw - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uintptr_t a = T->wrefs[mid].addr;
        if (a == fut)
            return T->wrefs[mid].ix;
        if (a < fut)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Up to max items of the tuple tup.  Returns the count, or -1. */
static int tuple_items(const struct ps_tasks *T, uintptr_t tup, uintptr_t *items, int max)
{
    int64_t size;
    if (T->py.tuple_type == 0 || ps_obj_type(&T->py, tup) != T->py.tuple_type ||
        ps_read(&size, tup + T->A.tuple_items - 8, sizeof size) != 0 || size < 0)
        return -1;
    int n = size < max ? (int)size : max;
    if (n > 0 && ps_read(items, tup + T->A.tuple_items, (size_t)n * sizeof *items) != 0)
        return -1;
    return n;
}

/* The objects callback cb holds that could be a private future: a
 * function's closure cell contents, or a functools.partial's args. */
static int callback_refs(const struct ps_tasks *T, uintptr_t cb, uintptr_t *refs, int max)
{
    const struct ps_python *py = &T->py;
    uintptr_t type = ps_obj_type(py, cb), tup;
    if (type == 0)
        return 0;
    if (type == py->func_type && py->func_type != 0) {
        uintptr_t cells[CB_REFS];
        if (ps_read_ptr(cb + T->A.func_closure, &tup) != 0 || tup == 0)
            return 0;
        int n = tuple_items(T, tup, cells, max < CB_REFS ? max : CB_REFS), k = 0;
        for (int c = 0; c < n; c++)
            if (py->cell_type != 0 && ps_obj_type(py, cells[c]) == py->cell_type &&
                ps_read_ptr(cells[c] + T->A.cell_ref, &refs[k]) == 0 && refs[k] != 0)
                k++;
        return k;
    }
    if (ps_type_named(py, type, "functools.partial") &&
        ps_read_ptr(cb + T->A.partial_args, &tup) == 0) {
        int n = tuple_items(T, tup, refs, max);
        return n < 0 ? 0 : n;
    }
    return 0;
}

static void link_callbacks(struct ps_tasks *T)
{
    uintptr_t cbs[CB_MAX], items[CB_MAX], refs[CB_REFS];
    T->nw = 0;
    for (int i = 0; i < T->n; i++) {
        const struct ps_task *t = &T->t[i];
        if (t->loop_ix >= 0 && T->loops[t->loop_ix].thread != 0 && ps_obj_ok(t->waiter) &&
            ps_obj_type(&T->py, t->waiter) == T->future_type) {
            T->wrefs[T->nw].addr = t->waiter;
            T->wrefs[T->nw].ix = i;
            T->nw++;
        }
    }
    if (T->nw == 0)
        return;
    qsort(T->wrefs, (size_t)T->nw, sizeof T->wrefs[0], by_addr);
    for (int i = 0; i < T->n; i++) {
        struct ps_task *t = &T->t[i];
        if (t->parent >= 0 || t->loop_ix < 0 || T->loops[t->loop_ix].thread == 0)
            continue;
        int nc = 0;
        if (ps_obj_ok(t->cb0))
            cbs[nc++] = t->cb0;
        if (ps_obj_ok(t->cbs)) {
            /* (callback, context) tuples */
            int n = ps_list_items(&T->py, t->cbs, items, CB_MAX - nc);
            for (int k = 0; k < n; k++) {
                uintptr_t pair[2];
                if (tuple_items(T, items[k], pair, 2) == 2 && ps_obj_ok(pair[0]))
                    cbs[nc++] = pair[0];
            }
        }
        for (int c = 0; c < nc && t->parent < 0; c++) {
            int nr = callback_refs(T, cbs[c], refs, CB_REFS);
            for (int r = 0; r < nr; r++) {
                int p = waiter_index(T, refs[r]);
                if (p >= 0 && p != i && T->t[p].loop_ix == t->loop_ix) {
                    t->parent = p;
                    T->t[p].has_child = 1;
                    break;
                }
            }
        }
    }
}

/* 3.14+: the tasks of each thread of interp, from its list; each thread
 * with tasks is one entry of loops[] (its running task from the thread
 * state).  Tasks of threads that exited (the interpreter's list) are not
 * running anywhere and are left out. */
static void collect_thread_lists(struct ps_tasks *T, uintptr_t interp)
{
    const struct ps_python *py = &T->py;
    const struct ps_async_layout *A = &T->A;
    uintptr_t ts;
    int budget = LIST_LINKS_PER_TASK * T->limit;   /* links followed, torn lists included */
    uint64_t g = 0;            /* index of a node over all lists */
    if (ps_read_ptr(interp + py->L.is_threads_head, &ts) != 0)
        return;
    for (int nts = 0; ts != 0 && nts < 4096 && budget > 0; nts++) {
        uintptr_t next, pth, running, node;
        if (ps_read_ptr(ts + py->L.ts_next, &next) != 0 ||
            ps_read_ptr(ts + py->L.ts_thread_id, &pth) != 0 ||
            ps_read_ptr(ts + A->ts_running_task, &running) != 0 ||
            ps_read_ptr(ts + A->ts_tasks_head, &node) != 0)
            return;
        uintptr_t head = ts + A->ts_tasks_head;
        int ix = -1;
        /* Only the nodes in this tick's window [cursor, cursor + limit)
         * are read as tasks; the others cost one read each. */
        for (; node != head && node != 0 && budget > 0; budget--, g++) {
            uintptr_t nn;
            if ((node & 7) || ps_read_ptr(node, &nn) != 0)
                break;
            if (g >= T->cursor && T->n < T->limit &&
                read_task(T, node - A->task_node, &T->t[T->n]) == 0) {
                if (ix < 0 && T->nloops < PS_TASKS_LOOPS) {
                    ix = T->nloops++;
                    T->loops[ix].loop = ts;
                    T->loops[ix].thread = (unsigned long)pth;
                    T->loops[ix].running = running;
                }
                T->t[T->n].loop_ix = ix;
                T->n++;
            }
            node = nn;
        }
        ts = next;
    }
    /* Counted on the marker: the nodes seen but not read (beyond the link
     * budget, more may exist). */
    T->skipped = (int64_t)g > T->n ? (int64_t)g - T->n : 0;
    T->cursor = T->cursor + (uint64_t)T->limit < g ? T->cursor + (uint64_t)T->limit : 0;
}

/* 3.14+: asyncio records who awaits a task (await, gather, TaskGroup,
 * shield) in the task's awaited_by: a task, or a set of them. */
static void link_awaited_by(struct ps_tasks *T, int i)
{
    struct ps_task *t = &T->t[i];
    uintptr_t items[8];
    int n = 0;
    if (t->awaited_by == 0)
        return;
    if (t->awaited_by_is_set) {
        uint64_t cursor = 0;
        int64_t used;
        n = ps_set_keys(&T->py, t->awaited_by, items, 8, &cursor, &used);
    } else {
        items[0] = t->awaited_by;
        n = 1;
    }
    for (int k = 0; k < n; k++) {
        int p = find_task(T, items[k]);
        if (p >= 0 && p != i) {
            t->parent = p;
            T->t[p].has_child = 1;
            return;
        }
    }
}

/* Each attributed task's suspended coroutine chain, into fr[]. */
static void chains(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *tab, int lines)
{
    size_t cap = (size_t)PS_TASKS_MAX * PS_TASKS_CORO_DEPTH;
    for (int i = 0; i < T->n; i++) {
        struct ps_task *t = &T->t[i];
        if (t->loop_ix < 0 || T->loops[t->loop_ix].thread == 0)
            continue;
        int max = PS_TASKS_CORO_DEPTH;
        if (cap - T->nfr < (size_t)max)
            break;
        t->fr_at = (uint32_t)T->nfr;
        t->nfr = (uint32_t)coro_chain(T, cc, tab, lines, t->coro, T->fr + T->nfr, max,
                                      &t->coro_frame, &t->tg);
        T->nfr += t->nfr;
    }
}

/* --- the tick ----------------------------------------------------------------- */

void ps_tasks_clear(struct ps_tasks *T)
{
    T->n = 0;
    T->nloops = 0;
    T->nfr = 0;
    T->skipped = 0;
}

void ps_tasks_tick(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *tab,
                   int lines, uintptr_t interp, uint64_t now)
{
    ps_tasks_clear(T);
    if (T->state == 2)
        return;
    if (T->state == 0) {
        if (now < T->next_search)
            return;
        search(T, interp, now);
        if (T->state != 1)
            return;
    }
    if (interp != T->interp)
        return;
    T->limit = ps_mem_mode() == PS_READ_DIRECT ? PS_TASKS_MAX : PS_TASKS_MAX_SLOW;

    if (T->A.tasks_kind == PS_ATASKS_THREAD_LISTS) {
        collect_thread_lists(T, interp);
        sort_tasks(T);
        chains(T, cc, tab, lines);
        for (int i = 0; i < T->n; i++)
            link_awaited_by(T, i);
        return;
    }
    /* The tasks: the eager ones first (few, and running now), then the
     * scheduled ones from where the last tick stopped. */
    int64_t used = 0, total = 0, seen = 0;
    int nk;
    if (T->eager_set != 0) {
        uint64_t c = 0;
        nk = ps_set_keys(&T->py, T->eager_set, T->keys, T->limit, &c, &used);
        if (nk > 0) {
            add_tasks(T, T->keys, nk, 0);
            total += used;
            seen += nk;
        }
    }
    nk = ps_set_keys(&T->py, T->all_set, T->keys, T->limit - T->n, &T->cursor, &used);
    if (nk < 0)
        return;
    total += used;
    seen += nk;
    add_tasks(T, T->keys, nk, 1);
    if (total > seen)
        T->skipped = total - seen;
    sort_tasks(T);

    for (int i = 0; i < T->n; i++)
        T->t[i].loop_ix = loop_index(T, T->t[i].loop);
    ps_dict_each(&T->py, T->current, 64, current_each, T);

    chains(T, cc, tab, lines);
    for (int i = 0; i < T->n; i++)
        if (T->t[i].loop_ix >= 0 && T->loops[T->t[i].loop_ix].thread != 0)
            link_children(T, i);
    link_callbacks(T);
}

int ps_tasks_on_thread(const struct ps_tasks *T, unsigned long pthread_id)
{
    for (int i = 0; i < T->nloops; i++)
        if (T->loops[i].thread == pthread_id)
            return 1;
    return 0;
}

/* --- stacks ---------------------------------------------------------------------- */

/* The marker frame "[task <name> "<coroutine>"]" of task t. */
static uint32_t task_marker(struct ps_tasks *T, struct ps_symtab *syms, const struct ps_task *t)
{
    struct mark *m = &T->marks[(t->addr >> 4) & (MARKS - 1)];
    if (m->task == t->addr && m->name == t->name && m->coro == t->coro && m->text[0])
        return ps_sym_marker(syms, m->text);
    char name[64], coro[96];
    uint64_t num;
    uintptr_t q;
    /* A name or coroutine that does not read as one is a task changing
     * under us (being set up, or freed): no marker, and the task is left
     * out of this sample rather than shown under a made-up name. */
    if (ps_obj_type(&T->py, t->name) == T->py.str_type &&
        ps_str_read(&T->py.L, t->name, name, sizeof name) >= 0)
        ;
    else if (ps_long_value(&T->py, t->name, &num) == 0)
        snprintf(name, sizeof name, "Task-%llu", (unsigned long long)num);  /* 3.12+: lazy */
    else
        return PS_ID_NONE;
    if (ps_read_ptr(t->coro + T->A.gi_qualname, &q) != 0 ||
        ps_obj_type(&T->py, q) != T->py.str_type || ps_str_read(&T->py.L, q, coro, sizeof coro) < 0)
        return PS_ID_NONE;
    snprintf(m->text, sizeof m->text, "[task %s \"%s\"]", name, coro);
    m->task = t->addr;
    m->name = t->name;
    m->coro = t->coro;
    return ps_sym_marker(syms, m->text);
}

/* Appends, root first, the chain of tasks awaiting task i (outermost
 * first), each as its marker and its suspended frames.  Returns the new
 * depth, or -1 if it does not fit. */
static int awaiters(struct ps_tasks *T, struct ps_symtab *syms, int i,
                    uint64_t *out, int d, int max)
{
    int chain[PS_TASKS_CHAIN], nc = 0;
    for (int p = T->t[i].parent; p >= 0 && nc < PS_TASKS_CHAIN; p = T->t[p].parent) {
        for (int k = 0; k < nc; k++)
            if (chain[k] == p)
                return -1;  /* a cycle: links read at different moments */
        chain[nc++] = p;
    }
    for (int k = nc - 1; k >= 0; k--) {
        const struct ps_task *t = &T->t[chain[k]];
        if (d + 1 + (int)t->nfr > max)
            return -1;
        uint32_t f = task_marker(T, syms, t);
        if (f == PS_ID_NONE)
            return -1;
        out[d++] = ps_frame(f, PS_LINE_NONE);
        memcpy(out + d, T->fr + t->fr_at, t->nfr * sizeof *out);
        d += (int)t->nfr;
    }
    return d;
}

int ps_tasks_splice_running(struct ps_tasks *T, struct ps_symtab *syms,
                            unsigned long pthread_id, const uint64_t *frames,
                            const uintptr_t *addrs, int n, uint64_t *out, int d0, int max)
{
    for (int l = 0; l < T->nloops; l++) {
        const struct ps_aloop *lp = &T->loops[l];
        if (lp->thread != pthread_id || lp->running == 0)
            continue;
        int i = find_task(T, lp->running);
        if (i < 0 || T->t[i].coro_frame == 0)
            continue;
        int k = -1;
        for (int j = 0; j < n; j++)
            if (addrs[j] == T->t[i].coro_frame)
                k = j;
        /* The loop's frames must be above the coroutine's: a walk that
         * ends at the coroutine was torn (3.11 clears a generator frame's
         * previous as it leaves it) and is not dressed as a task's. */
        if (k < 0 || k == n - 1)
            continue;
        int d = d0;
        if (d + (n - k - 1) > max)
            return -1;
        for (int j = n - 1; j > k; j--)
            out[d++] = frames[j];    /* the loop running the task */
        d = awaiters(T, syms, i, out, d, max);
        if (d < 0 || d + 1 + k + 1 > max)
            return -1;
        uint32_t f = task_marker(T, syms, &T->t[i]);
        if (f == PS_ID_NONE)
            return -1;
        out[d++] = ps_frame(f, PS_LINE_NONE);
        for (int j = k; j >= 0; j--)
            out[d++] = frames[j];
        return d;
    }
    return -1;
}

int ps_tasks_emit_waiting(struct ps_tasks *T, struct ps_symtab *syms, struct ps_stacktab *tab,
                          unsigned long pthread_id, uint32_t label, uint64_t *buf, int d0,
                          int max, uint64_t weight)
{
    int added = 0;
    for (int i = 0; i < T->n; i++) {
        const struct ps_task *t = &T->t[i];
        if (t->loop_ix < 0 || t->has_child)
            continue;
        const struct ps_aloop *lp = &T->loops[t->loop_ix];
        if (lp->thread != pthread_id || lp->running == t->addr)
            continue;
        int d = awaiters(T, syms, i, buf, d0, max);
        if (d < 0 || d + 1 + (int)t->nfr > max)
            continue;
        uint32_t f = task_marker(T, syms, t);
        if (f == PS_ID_NONE)
            continue;
        buf[d++] = ps_frame(f, PS_LINE_NONE);
        memcpy(buf + d, T->fr + t->fr_at, t->nfr * sizeof *buf);
        d += (int)t->nfr;
        if (ps_stacktab_add(tab, label, buf, (uint32_t)d, weight) == 0)
            added++;
    }
    /* Tasks beyond the bound: counted, on the first loop's thread. */
    if (T->skipped > 0 && T->nloops > 0 && T->loops[0].thread == pthread_id) {
        T->more_func = ps_sym_marker(syms, "[pysample: asyncio tasks not sampled]");
        buf[d0] = ps_frame(T->more_func, PS_LINE_NONE);
        if (T->more_func != PS_ID_NONE &&
            ps_stacktab_add(tab, label, buf, (uint32_t)d0 + 1, (uint64_t)T->skipped * weight) == 0)
            added += (int)T->skipped;
    }
    return added;
}
