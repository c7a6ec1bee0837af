/*
 * Unit test: which asyncio task awaits which (lib/asyncio/tasks_link.c),
 * on fake memory (the 3.9 layout of objects; the asyncio offsets are the
 * test's own, the linker reads what it is told).  The tasks of one tick's
 * snapshot are built with what tasks_read.c fills in (address, loop,
 * fut_waiter, TaskGroup, done-callbacks, 3.14's awaited_by) and the
 * objects those point to laid out in memory; after linking, each task's
 * parent must be the task that awaits it in the program:
 *
 *   await          A awaits task B                     (fut_waiter = B)
 *   gather         C awaits gather(D, gather(E))       (_GatheringFuture._children)
 *   TaskGroup      F's group runs G and H              (TaskGroup._tasks)
 *   shield         J awaits shield(K)                  (K's callback0: a
 *                                                       function, closure cell = J's future)
 *   wait_for       L awaits wait_for(M)  (3.9-3.11)    (M's callbacks: a
 *                                                       partial, args = (L's future,))
 * and no link: a task on a loop that is not running, a callback on
 * another loop, a task awaiting itself, a second awaiter of one task.
 * Then 3.14+'s awaited_by: one task, or a set of them.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "memory/memread.h"
#include "python/layout.h"
#include "python/pyobj.h"
#include "asyncio/tasks_impl.h"

#include "fake_memory.h"

static struct ps_python *PY;

static uintptr_t new_type(const char *name)
{
    const struct ps_layout *L = &PY->L;
    uintptr_t t = alloc(1024), s = alloc(strlen(name) + 1);
    memcpy((void *)s, name, strlen(name) + 1);
    put_ptr(t + L->tp_name, s);
    put_i64(t + L->tp_dictoffset, 16);   /* instances keep a dict at +16 */
    return t;
}

static uintptr_t new_obj(uintptr_t type, size_t size)
{
    uintptr_t o = alloc(size);
    put_ptr(o + PY->L.ob_type, type);
    return o;
}

static uintptr_t new_str(const char *s)
{
    const struct ps_layout *L = &PY->L;
    size_t n = strlen(s);
    uintptr_t o = new_obj(PY->str_type, L->str_ascii_data + n + 1);
    fill_ascii_str(L, o, s);
    return o;
}

/* An instance of type whose dict holds one attribute, name = value (the
 * 3.9 combined table: 16 slots, 24-byte entries). */
static uintptr_t new_inst(uintptr_t type, const char *name, uintptr_t value)
{
    const struct ps_layout *L = &PY->L;
    uintptr_t k = alloc(40 + 16 + 24 * 10);
    put_i64(k + L->dk_size_at, 16);
    put_i64(k + L->dk_nentries_at, 1);
    uintptr_t ents = k + L->dk_indices_at + 16;
    put_ptr(ents + 8, new_str(name));
    put_ptr(ents + 16, value);
    uintptr_t d = new_obj(PY->dict_type, 64);
    put_ptr(d + L->dict_keys, k);
    uintptr_t o = new_obj(type, 64);
    put_ptr(o + 16, d);
    return o;
}

static uintptr_t new_list(int n, const uintptr_t *items)
{
    uintptr_t a = alloc(8 * (size_t)(n + 1)), l = new_obj(PY->list_type, 48);
    for (int i = 0; i < n; i++)
        put_ptr(a + 8 * (uintptr_t)i, items[i]);
    put_i64(l + 16, n);
    put_ptr(l + 24, a);
    return l;
}

/* A set of 8 slots holding n keys. */
static uintptr_t new_set(int n, const uintptr_t *keys)
{
    uintptr_t table = alloc(16 * 8), s = new_obj(PY->set_type, 200);
    for (int i = 0; i < n; i++)
        put_ptr(table + 16 * (uintptr_t)(2 * i + 1), keys[i]);
    put_i64(s + 24, n);
    put_i64(s + 32, 7);
    put_ptr(s + 40, table);
    return s;
}

static uintptr_t new_tuple(const struct ps_tasks *T, int n, const uintptr_t *items)
{
    uintptr_t t = new_obj(PY->tuple_type, T->A.tuple_items + 8 * (size_t)(n + 1));
    put_i64(t + T->A.tuple_items - 8, n);
    for (int i = 0; i < n; i++)
        put_ptr(t + T->A.tuple_items + 8 * (uintptr_t)i, items[i]);
    return t;
}

/* shield()'s _inner_done_callback: a function whose closure cell holds fut. */
static uintptr_t new_closure_over(const struct ps_tasks *T, uintptr_t fut)
{
    uintptr_t cell = new_obj(PY->cell_type, 32);
    put_ptr(cell + T->A.cell_ref, fut);
    uintptr_t fn = new_obj(PY->func_type, 128);
    put_ptr(fn + T->A.func_closure, new_tuple(T, 1, &cell));
    return fn;
}

/* wait_for's functools.partial(_release_waiter, fut). */
static uintptr_t new_partial(const struct ps_tasks *T, uintptr_t partial_type, uintptr_t fut)
{
    uintptr_t p = new_obj(partial_type, 64);
    put_ptr(p + T->A.partial_args, new_tuple(T, 1, &fut));
    return p;
}

enum { A, B, C, D, E, F, G, H, J, K, L_, M, N, O, P, Q, R, S, U, NT };

static struct ps_tasks *new_tasks(int n)
{
    struct ps_tasks *T = calloc(1, sizeof *T);
    T->py = PY;
    T->A.tuple_items = 24;
    T->A.func_closure = 48;
    T->A.cell_ref = 16;
    T->A.partial_args = 24;
    T->t = calloc((size_t)n, sizeof *T->t);
    T->refs = calloc((size_t)n, sizeof *T->refs);
    T->wrefs = calloc((size_t)n, sizeof *T->wrefs);
    T->n = n;
    T->loops[0] = (struct ps_aloop){ .loop = 0x1000, .thread = 7 };
    T->loops[1] = (struct ps_aloop){ .loop = 0x2000, .thread = 8 };
    T->loops[2] = (struct ps_aloop){ .loop = 0x3000, .thread = 0 };   /* not running */
    T->nloops = 3;
    for (int i = 0; i < n; i++)
        T->t[i].parent = -1;
    return T;
}

static void free_tasks(struct ps_tasks *T)
{
    free(T->t);
    free(T->refs);
    free(T->wrefs);
    free(T);
}

/* The parent of the task at index i, as a task index, or -1. */
#define PARENT(T, i) ((T)->t[i].parent)

static void test_waiters(void)
{
    struct ps_tasks *T = new_tasks(NT);
    T->task_type = new_type("_asyncio.Task");
    T->future_type = new_type("_asyncio.Future");
    uintptr_t task_sub = new_type("MyTask");   /* a Task subclass */
    put_ptr(task_sub + PY->L.tp_base, T->task_type);
    uintptr_t gathering = new_type("_GatheringFuture");
    uintptr_t group = new_type("TaskGroup");
    uintptr_t partial = new_type("functools.partial");
    uintptr_t addr[NT];
    for (int i = 0; i < NT; i++) {
        addr[i] = new_obj(i == E ? task_sub : T->task_type, 64);
        T->t[i].addr = addr[i];
        T->t[i].loop_ix = 0;
    }
    /* await */
    T->t[A].waiter = addr[B];
    /* gather(D, gather(E)) */
    uintptr_t inner = new_inst(gathering, "_children", new_list(1, &addr[E]));
    uintptr_t outer_items[2] = { addr[D], inner };
    T->t[C].waiter = new_inst(gathering, "_children", new_list(2, outer_items));
    /* TaskGroup: F waits on a plain future in __aexit__ */
    uintptr_t gh[2] = { addr[G], addr[H] };
    T->t[F].waiter = new_obj(T->future_type, 64);
    T->t[F].tg = new_inst(group, "_tasks", new_set(2, gh));
    /* shield(K): J waits on a private plain future K's callback knows */
    uintptr_t jf = new_obj(T->future_type, 64);
    T->t[J].waiter = jf;
    T->t[K].cb0 = new_closure_over(T, jf);
    /* wait_for(M): L's private future in a partial among M's callbacks
     * (a list of (callback, context) pairs) */
    uintptr_t lf = new_obj(T->future_type, 64);
    T->t[L_].waiter = lf;
    uintptr_t pair[2] = { new_partial(T, partial, lf), 0x5000 };
    uintptr_t pairs[2] = { new_tuple(T, 2, pair), new_tuple(T, 2, pair) };
    T->t[M].cbs = new_list(2, pairs);
    /* N awaits O, but N's loop is not running: no link */
    T->t[N].waiter = addr[O];
    T->t[N].loop_ix = 2;
    /* P on loop 1 holds J's future in a callback: another loop, no link */
    T->t[P].loop_ix = 1;
    T->t[P].cb0 = new_closure_over(T, jf);
    /* Q awaits itself: no link */
    T->t[Q].waiter = addr[Q];
    /* R and S both claim U: it gets one awaiter, the first */
    T->t[R].waiter = addr[U];
    T->t[S].waiter = addr[U];

    ps_tasks_sort(T);
    for (int i = 0; i < NT; i++)
        CHECK_EQ_INT(ps_tasks_find(T, addr[i]), i);
    CHECK_EQ_INT(ps_tasks_find(T, addr[A] + 8), -1);
    ps_tasks_link_waiters(T);

    int want[NT];
    for (int i = 0; i < NT; i++)
        want[i] = -1;
    want[B] = A;
    want[D] = C;
    want[E] = C;
    want[G] = F;
    want[H] = F;
    want[K] = J;
    want[M] = L_;
    want[U] = R;
    for (int i = 0; i < NT; i++) {
        if (PARENT(T, i) != want[i])
            fprintf(stderr, "task %d: parent %d, want %d\n", i, PARENT(T, i), want[i]);
        CHECK_EQ_INT(PARENT(T, i), want[i]);
    }
    CHECK(T->t[A].has_child && T->t[C].has_child && T->t[F].has_child && T->t[J].has_child &&
          T->t[L_].has_child && T->t[R].has_child);
    CHECK(!T->t[B].has_child && !T->t[N].has_child && !T->t[Q].has_child && !T->t[S].has_child);
    free_tasks(T);
}

static void test_awaited_by(void)
{
    struct ps_tasks *T = new_tasks(6);
    T->task_type = new_type("_asyncio.Task");
    uintptr_t addr[6];
    for (int i = 0; i < 6; i++) {
        addr[i] = new_obj(T->task_type, 64);
        T->t[i].addr = addr[i];
        T->t[i].loop_ix = 0;
    }
    /* 1 is awaited by 0; 2 by a set of {an unknown object, 3}; 4 by
     * itself (no link); 5 by an address that is no task (no link). */
    T->t[1].awaited_by = addr[0];
    uintptr_t set_keys[2] = { new_obj(T->task_type, 64), addr[3] };
    T->t[2].awaited_by = new_set(2, set_keys);
    T->t[2].awaited_by_is_set = 1;
    T->t[4].awaited_by = addr[4];
    T->t[5].awaited_by = addr[5] + 64;
    ps_tasks_sort(T);
    ps_tasks_link_awaited_by(T);
    CHECK_EQ_INT(PARENT(T, 0), -1);
    CHECK_EQ_INT(PARENT(T, 1), 0);
    CHECK_EQ_INT(PARENT(T, 2), 3);
    CHECK_EQ_INT(PARENT(T, 3), -1);
    CHECK_EQ_INT(PARENT(T, 4), -1);
    CHECK_EQ_INT(PARENT(T, 5), -1);
    CHECK(T->t[0].has_child && T->t[3].has_child && !T->t[4].has_child);
    free_tasks(T);
}

int main(void)
{
    static struct ps_python py;
    char why[128];
    PY = &py;
    CHECK_EQ_INT(ps_mem_init(), 0);
    CHECK_EQ_INT(ps_layout_legacy(9, 0x030900f0u, &py.L, why, sizeof why), PS_LAYOUT_OK);
    py.dict_type = new_type("dict");
    py.set_type = new_type("set");
    py.list_type = new_type("list");
    py.str_type = new_type("str");
    py.tuple_type = new_type("tuple");
    py.func_type = new_type("function");
    py.cell_type = new_type("cell");
    test_waiters();
    test_awaited_by();
    CHECK_DONE();
}
