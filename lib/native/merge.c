/*
 * merge.c - one stack out of a native unwind and a Python walk.
 *
 * The rule (py-spy's): each call of the evaluation loop
 * (_PyEval_EvalFrameDefault, by symbol, ".cold" parts included) on the
 * native stack stands for the Python frames it runs.  The Python walk
 * says which frames belong to one call (frames.h: entry marks), so the
 * k-th evaluation-loop frame from the leaf is replaced by the k-th group
 * of Python frames from the leaf.
 *
 * What is shown (PYSAMPLE_NATIVE=1): every native frame leafward of the
 * innermost Python frame (the C code the Python code called, down to the
 * system call or the GIL wait), and, between two Python frames, the
 * frames of objects other than the interpreter (a C extension, ctypes'
 * libffi, a C callback calling back into Python).  Hidden: the
 * interpreter's own frames between and below Python frames, and the
 * thread's start-up frames below the outermost Python frame.
 * PYSAMPLE_NATIVE=all hides nothing.
 *
 * When the two do not fit:
 *   - the unwind stopped early ([native: truncated]): the Python groups it
 *     did not reach go at the root, above the marker;
 *   - otherwise a different count (the thread moved between the two, or a
 *     build whose evaluation loop we do not recognise): the Python stack
 *     alone, ending in [native: mismatch];
 *   - no registers at all (a thread that did not answer the signal, a
 *     sample that changed under us): the Python stack alone, ending in
 *     [native: unavailable].
 * Every sample is counted once either way.
 *
 * Names are interned once per address: a direct-mapped cache from pc to
 * function id, valid for one generation of the symbol table (a clear
 * makes a new one) and one list of loaded objects (ps_objs_generation):
 * nobody has to tell it that either changed.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/counters.h"
#include "native/native.h"
#include "util/symtab.h"

#define PS_PCCACHE 8192   /* power of two */

enum { K_OTHER = 0, K_INTERP, K_EVAL };

struct pcent {
    uintptr_t pc;
    const struct ps_symtab *tab;   /* the table func belongs to ... */
    uint32_t syms_gen;             /* ... as it was then (symtab.h) */
    uint32_t objs_gen;             /* the loaded objects then (stacks.h) */
    uint32_t func;
    uint8_t kind;
};

/* The sampler context's cache (native.h), not a file-level table: made
 * only where native stacks are asked for. */
/* Outcomes of the native samples (PYSAMPLE_STATS), counted by the
 * merging thread, read by whoever writes the statistics: relaxed atomics. */
enum { O_ROOT = 0, O_UNAVAILABLE, O_MISMATCH, O_N };

struct ps_native_names {
    struct pcent e[PS_PCCACHE];
    _Atomic uint64_t outcomes[O_N], truncated_by[PS_STOP_N];
};

struct ps_native_names *ps_native_names_new(void)
{
    return calloc(1, sizeof(struct ps_native_names));
}


/* The names of enum ps_unwind_stop, for the statistics. */
static const char *const stop_names[PS_STOP_N] = {
    [PS_STOP_ROOT] = "root", [PS_STOP_NO_REGS] = "no_regs", [PS_STOP_MAX] = "max",
    [PS_STOP_NO_OBJECT] = "no_object", [PS_STOP_CFI] = "cfi", [PS_STOP_SIGNAL] = "signal",
    [PS_STOP_REGISTER] = "register", [PS_STOP_READ] = "read", [PS_STOP_BAD_FRAME] = "bad_frame",
};

static void count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static uint32_t marker(struct ps_symtab *t, const char *s)
{
    return ps_sym_marker(t, s);
}

/* Name and kind of a native frame; a is the address looked up (a return
 * address minus one, so that a call at the very end of a function is
 * named after that function). */
static const struct pcent *resolve(struct ps_native_names *names, struct ps_symtab *t,
                                   uintptr_t a)
{
    struct pcent *e = &names->e[(a ^ (a >> 13)) & (PS_PCCACHE - 1)];
    uint32_t objs_gen = ps_objs_generation();
    if (e->pc == a && e->tab == t && e->syms_gen == t->generation && e->objs_gen == objs_gen &&
        e->func != PS_ID_NONE)
        return e;
    char buf[64];
    const struct ps_obj *o = ps_objs_find(a);
    e->kind = K_OTHER;
    if (o == NULL) {
        snprintf(buf, sizeof buf, "[unknown]+0x%lx", (unsigned long)a);
        e->func = marker(t, buf);
    } else {
        const char *sym = ps_obj_symbol(o, a);
        if (ps_obj_is_interp(o))
            e->kind = K_INTERP;
        if (sym != NULL && strncmp(sym, "_PyEval_EvalFrameDefault", 24) == 0 &&
            (sym[24] == '\0' || sym[24] == '.'))
            e->kind = K_EVAL;
        /* sym NULL: "library+0x1234" */
        e->func = ps_sym_native(t, sym, ps_obj_name(o), ps_obj_offset(o, a));
    }
    e->pc = a;
    e->tab = t;
    e->syms_gen = t->generation;
    e->objs_gen = objs_gen;
    return e;
}

/* Appends the Python frames py[from..to] (innermost first), root first. */
static int put_py(uint64_t *out, int d, int cap, const struct ps_pyframe *py, int from, int to)
{
    for (int i = to; i >= from && d < cap; i--)
        out[d++] = py[i].frame;
    return d;
}

static int put(uint64_t *out, int d, int cap, uint32_t func)
{
    if (func != PS_ID_NONE && d < cap)
        out[d++] = ps_frame(func, PS_LINE_NONE);
    return d;
}

/* Groups of Python frames, innermost first, one per evaluation-loop call:
 * group g is py[start[g] .. end[g]]. */
struct groups {
    int start[PS_NATIVE_MAX], end[PS_NATIVE_MAX];
    int n;
};

/* A group ends at each frame marked as its call's first (frames.h:
 * entry); frames beyond the last group there is room for join it. */
static void group_python(const struct ps_pyframe *py, int npy, struct groups *g)
{
    g->n = 0;
    for (int i = 0; i < npy && g->n < PS_NATIVE_MAX; i++) {
        if (i == 0 || py[i - 1].entry)
            g->start[g->n] = i, g->end[g->n] = i, g->n++;
        else
            g->end[g->n - 1] = i;
    }
    if (g->n > 0)
        g->end[g->n - 1] = npy - 1;
}

/* The native frames, innermost first, named and classified, and where the
 * evaluation-loop frames among them are (innermost, outermost). */
struct natives {
    uint8_t kind[PS_NATIVE_MAX];
    uint32_t func[PS_NATIVE_MAX];
    int n, evals, inner_eval, outer_eval;
};

static void classify_native(const struct ps_native_merge_req *rq, struct natives *nv)
{
    const uintptr_t *pcs = rq->pcs;
    nv->n = rq->npcs < PS_NATIVE_MAX ? rq->npcs : PS_NATIVE_MAX;
    nv->evals = 0;
    nv->inner_eval = -1;
    nv->outer_eval = -1;
    for (int i = 0; i < nv->n; i++) {
        const struct pcent *e = resolve(rq->names, rq->syms, i == 0 ? pcs[i] : pcs[i] - 1);
        nv->kind[i] = e->kind;
        nv->func[i] = e->func;
        if (e->kind == K_EVAL) {
            if (nv->inner_eval < 0)
                nv->inner_eval = i;
            nv->outer_eval = i;
            nv->evals++;
        }
    }
}

/* Why the two walks are not merged: the marker the Python stack alone
 * ends in, with *outcome saying which, or NULL if they fit.  More
 * evaluation-loop frames than Python groups never fit; fewer only when
 * the unwind stopped early. */
static const char *merge_refused(const struct ps_native_merge_req *rq, const struct groups *g,
                                 const struct natives *nv, int *outcome)
{
    *outcome = O_UNAVAILABLE;
    if (rq->no_native_why != NULL)
        return rq->no_native_why;
    if (rq->npcs == 0)
        return "[native: unavailable]";
    int native_truncated = rq->stop != PS_STOP_ROOT;
    if (nv->evals > g->n || (!native_truncated && nv->evals != g->n)) {
        *outcome = O_MISMATCH;
        return "[native: mismatch]";
    }
    return NULL;
}

/* The Python stack alone, root first, ending in the marker why. */
static int python_alone(const struct ps_native_merge_req *rq, const char *why)
{
    int d = put_py(rq->out, 0, rq->cap, rq->py, 0, rq->npy - 1);
    return put(rq->out, d, rq->cap, marker(rq->syms, why));
}

/* Is native frame i shown?  Unless PYSAMPLE_NATIVE=all: not below the
 * outermost evaluation loop (thread and interpreter start-up), nor the
 * interpreter's own frames between two Python frames. */
static int native_shown(const struct ps_native_merge_req *rq, const struct natives *nv, int i)
{
    if (rq->mode == PS_NATIVE_ALL || nv->evals == 0)
        return 1;
    if (i > nv->outer_eval)
        return 0;
    return !(i > nv->inner_eval && nv->kind[i] == K_INTERP);
}

/* The merged stack, root first: the groups the unwind did not reach (it
 * stopped early) and its marker, then from the root each native frame
 * shown, each evaluation-loop frame replaced by its group. */
static int merged(const struct ps_native_merge_req *rq, const struct groups *g,
                  const struct natives *nv)
{
    uint64_t *out = rq->out;
    int d = 0;
    if (nv->evals < g->n)
        d = put_py(out, d, rq->cap, rq->py, g->start[nv->evals], rq->npy - 1);
    if (rq->stop != PS_STOP_ROOT)
        d = put(out, d, rq->cap, marker(rq->syms, "[native: truncated]"));
    int k = nv->evals;   /* groups still to place, from the root */
    for (int i = nv->n - 1; i >= 0; i--) {
        if (nv->kind[i] == K_EVAL) {
            k--;
            d = put_py(out, d, rq->cap, rq->py, g->start[k], g->end[k]);
        } else if (native_shown(rq, nv, i)) {
            d = put(out, d, rq->cap, nv->func[i]);
        }
    }
    return d;
}

/* The unwind's outcome, for ps_native_stats: at the root, or cut, by cause. */
static void count_merged(struct ps_native_names *nn, int stop)
{
    if (stop == PS_STOP_ROOT)
        count(&nn->outcomes[O_ROOT]);
    else
        count(&nn->truncated_by[stop > 0 && stop < PS_STOP_N ? stop : PS_STOP_CFI]);
}

int ps_native_merge(const struct ps_native_merge_req *rq)
{
    struct groups g;
    struct natives nv;
    int outcome;
    group_python(rq->py, rq->npy, &g);
    classify_native(rq, &nv);
    const char *why = merge_refused(rq, &g, &nv, &outcome);
    if (why != NULL) {
        count(&rq->names->outcomes[outcome]);
        return python_alone(rq, why);
    }
    count_merged(rq->names, rq->stop);
    return merged(rq, &g, &nv);
}

int ps_native_stats(struct ps_unwind_rules *ur, struct ps_native_names *nn, char *buf,
                    size_t len)
{
    uint64_t tr = 0;
    for (int i = 1; i < PS_STOP_N; i++)
        tr += atomic_load_explicit(&nn->truncated_by[i], memory_order_relaxed);
    struct ps_unwind_counts u;
    ps_unwind_counts(ur, &u);
    size_t n = 0;
    int m = snprintf(buf, len,
                     "native_root %llu\nnative_truncated %llu\nnative_unavailable %llu\n"
                     "native_mismatch %llu\nnative_rule_hits %llu\nnative_rule_misses %llu\n"
                     "native_fp_frames %llu\nnative_nocfi_frames %llu\nnative_signal_frames %llu\n"
                     "native_unwinds %llu\nnative_unwind_frames %llu\nnative_unwind_ns %llu\n",
                     (unsigned long long)atomic_load(&nn->outcomes[O_ROOT]), (unsigned long long)tr,
                     (unsigned long long)atomic_load(&nn->outcomes[O_UNAVAILABLE]),
                     (unsigned long long)atomic_load(&nn->outcomes[O_MISMATCH]),
                     (unsigned long long)u.hits, (unsigned long long)u.misses,
                     (unsigned long long)u.fp_frames, (unsigned long long)u.nocfi_frames,
                     (unsigned long long)u.signal_frames,
                     (unsigned long long)u.walks, (unsigned long long)u.frames,
                     (unsigned long long)u.ns);
    for (int i = 1; m > 0 && (size_t)m < len - n && i < PS_STOP_N; i++) {
        n += (size_t)m;
        m = snprintf(buf + n, len - n, "native_truncated_%s %llu\n", stop_names[i],
                     (unsigned long long)atomic_load(&nn->truncated_by[i]));
    }
    if (m < 0 || (size_t)m >= len - n)
        return 0;
    return (int)(n + (size_t)m);
}

void ps_native_stats_reset(struct ps_unwind_rules *ur, struct ps_native_names *nn)
{
    ps_counters_zero(nn->outcomes, O_N);
    ps_counters_zero(nn->truncated_by, PS_STOP_N);
    ps_unwind_counts_reset(ur);
}
