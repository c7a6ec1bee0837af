/*
 * tasks_search.c - where asyncio's task registries are, found in raw
 * memory without running Python (tasks_impl.h).
 *
 * 3.9-3.13:
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
 * Without _asyncio (asyncio's pure-Python fallback) tasks are plain Python
 * objects: refused with one note.
 *
 * 3.14+ keeps no task set: every native task is on a linked list of the
 * thread that created it (_PyThreadStateImpl.asyncio_tasks_head, through
 * TaskObj.task_node), and each thread state holds its running task.  The
 * offsets come from _asyncio's _AsyncioDebug table (debug_table()).
 */
#include <stdio.h>

#include "memory/memread.h"
#include "util/message.h"
#include "platform/platform.h"
#include "python/pyobj.h"
#include "python/pystr.h"
#include "asyncio/tasks_impl.h"

/* Looking for asyncio (a scan of the modules dict, ~20 us with direct
 * reads): every 10 ms at first, then less often, up to once a second, so a
 * program that never imports asyncio (or reads through system calls, ~100x
 * dearer) pays next to nothing.  Between two searches, sys.modules is
 * peeked at every 10 ms (its keys object's entry count: three reads); a
 * module added since the last search starts the back-off again, so an
 * asyncio imported late (after a slow start-up, or seconds into the
 * program) is found within 10 ms rather than up to a second later. */
#define SEARCH_FIRST_NS 10000000ull
#define SEARCH_MAX_NS 1000000000ull

/* The entries of interp's sys.modules, or -1. */
static int64_t modules_entries(const struct ps_tasks *T, uintptr_t interp)
{
    uintptr_t modules;
    if (ps_read_ptr(interp + T->py->L.is_modules, &modules) != 0)
        return -1;
    return ps_dict_entries(T->py, modules);
}

int ps_tasks_modules_grew(struct ps_tasks *T, uintptr_t interp, uint64_t now)
{
    if (now < T->next_peek)
        return 0;
    T->next_peek = now + SEARCH_FIRST_NS;
    int64_t n = modules_entries(T, interp);
    if (n < 0 || n == T->modules_seen)
        return 0;
    T->search_every = 0;   /* something was imported: look again, and soon */
    return 1;
}

static int module_dict(const struct ps_tasks *T, uintptr_t mod, uintptr_t *dict)
{
    const struct ps_python *py = T->py;
    int ok = ps_type_named(py, ps_obj_type(py, mod), "module") &&
             ps_read_ptr(mod + T->A.md_dict, dict) == 0 && ps_obj_type(py, *dict) == py->dict_type;
    return ok ? 0 : -1;
}

/* The set inside a WeakSet instance (its data attribute). */
static uintptr_t weakset_data(const struct ps_python *py, uintptr_t ws)
{
    uintptr_t data;
    if (ps_attr_get(py, ws, "data", &data) != 0 || ps_obj_type(py, data) != py->set_type)
        return 0;
    return data;
}

/* The 13 values of the table debug_table() describes, from wherever it
 * is.  0, or -1. */
static int read_debug_table(const struct ps_tasks *T, uintptr_t mod_dict, uint64_t v[13])
{
    const struct ps_python *py = T->py;
    char file[4096];
    const char *path = NULL;
    uintptr_t f, addr;
    size_t size;
    if (ps_dict_get(py, mod_dict, "__file__", &f) == 0 && ps_obj_type(py, f) == py->str_type &&
        ps_str_read(&py->L, f, file, sizeof file) > 0)
        path = file;
    if (ps_image_section(path, py->runtime, ".AsyncioDebug", &addr, &size) != 0 ||
        size < 13 * sizeof v[0] || ps_read(v, addr, 13 * sizeof v[0]) != 0)
        return -1;
    return 0;
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
    uint64_t v[13];
    if (read_debug_table(T, mod_dict, v) != 0) {
        ps_say("PYSAMPLE_ASYNC: asyncio's _AsyncioDebug table was not found; "
               "tasks are not attributed, sampling threads only");
        T->state = PS_ASYNCIO_GAVE_UP;
        return -1;
    }
    struct ps_async_layout *A = &T->A;
    uint64_t tsize = v[0], name = v[1], awaited = v[2], is_task = v[3], is_set = v[4],
             coro = v[5], node = v[6], ts_size = v[9], running = v[11], head = v[12];
    uint32_t h = ps_ob_head(&T->py->L);   /* FutureObj_HEAD: 10 pointers, then awaited_by */
    if (tsize < 64 || tsize > 1024 || name + 8 > tsize || node + 16 > tsize ||
        awaited != h + 10 * 8 || is_task != awaited + 12 || is_set != is_task + 1 ||
        coro != name - 8 || node != name + 16 || ts_size < 256 || ts_size > (1u << 20) ||
        running + 8 > ts_size || head + 16 > ts_size) {
        ps_say("PYSAMPLE_ASYNC: asyncio's _AsyncioDebug table does not describe the Task "
               "this version of libpysample knows; tasks are not attributed");
        T->state = PS_ASYNCIO_GAVE_UP;
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

/* When to search next: sooner after a search that followed an import,
 * doubling up to SEARCH_MAX_NS while nothing is found. */
static void schedule_search(struct ps_tasks *T, uint64_t now)
{
    T->search_every = T->search_every == 0 ? SEARCH_FIRST_NS
                      : T->search_every >= SEARCH_MAX_NS / 2 ? SEARCH_MAX_NS
                                                            : 2 * T->search_every;
    T->next_search = now + T->search_every;
    T->next_peek = now + SEARCH_FIRST_NS;
}

/* The dict of the _asyncio module in interp's sys.modules, into *d; the
 * entries seen noted for ps_tasks_modules_grew.  0, or -1 (not imported,
 * or asyncio without its accelerator: then said, once for good). */
static int asyncio_dict(struct ps_tasks *T, uintptr_t interp, uintptr_t *d)
{
    const struct ps_python *py = T->py;
    uintptr_t modules, mod;
    T->modules_seen = -1;
    if (ps_read_ptr(interp + py->L.is_modules, &modules) != 0 ||
        ps_obj_type(py, modules) != py->dict_type)
        return -1;
    T->modules_seen = ps_dict_entries(py, modules);
    if (ps_dict_get(py, modules, "_asyncio", &mod) == 0 && module_dict(T, mod, d) == 0)
        return 0;
    /* asyncio imported its tasks module without the accelerator */
    if (ps_dict_get(py, modules, "asyncio.tasks", &mod) == 0) {
        ps_say("PYSAMPLE_ASYNC: asyncio runs without its C accelerator (_asyncio); "
               "tasks are not attributed, sampling threads only");
        T->state = PS_ASYNCIO_GAVE_UP;
    }
    return -1;
}

/* _asyncio's Task and Future types, which every object read as one must
 * be of.  0, or -1. */
static int task_types(struct ps_tasks *T, uintptr_t d)
{
    const struct ps_python *py = T->py;
    uintptr_t v;
    if (ps_dict_get(py, d, "Task", &v) != 0 || !ps_type_named(py, v, "_asyncio.Task"))
        return -1;
    T->task_type = v;
    if (ps_dict_get(py, d, "Future", &v) != 0 || !ps_type_named(py, v, "_asyncio.Future"))
        return -1;
    T->future_type = v;
    return 0;
}

/* 3.9-3.13: the module's task registries (see the top of the file).  0,
 * or -1. */
static int task_registries(struct ps_tasks *T, uintptr_t d)
{
    const struct ps_python *py = T->py;
    uintptr_t v;
    if (ps_dict_get(py, d, "_current_tasks", &v) != 0 || ps_obj_type(py, v) != py->dict_type)
        return -1;
    T->current = v;
    const char *all = T->A.tasks_kind == PS_ATASKS_ALL ? "_all_tasks" : "_scheduled_tasks";
    if (ps_dict_get(py, d, all, &v) != 0 || (T->all_set = weakset_data(py, v)) == 0)
        return -1;
    T->eager_set = 0;
    if (T->A.tasks_kind == PS_ATASKS_SCHEDULED_EAGER &&
        (ps_dict_get(py, d, "_eager_tasks", &v) != 0 || ps_obj_type(py, v) != py->set_type))
        return -1;
    if (T->A.tasks_kind == PS_ATASKS_SCHEDULED_EAGER)
        T->eager_set = v;
    return 0;
}

void ps_tasks_search(struct ps_tasks *T, uintptr_t interp, uint64_t now)
{
    uintptr_t d;
    schedule_search(T, now);
    if (asyncio_dict(T, interp, &d) != 0 || task_types(T, d) != 0)
        return;
    /* 3.14+: the running task is in each thread state: no _current_tasks */
    int found = T->A.tasks_kind == PS_ATASKS_THREAD_LISTS ? debug_table(T, d)
                                                         : task_registries(T, d);
    if (found == 0) {
        T->interp = interp;
        T->state = PS_ASYNCIO_FOUND;
    }
}
