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
 * function id, valid for one profile generation and one list of loaded
 * objects.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "sampler/counters.h"
#include "native/native.h"
#include "profile/symtab.h"

#define PS_PCCACHE 8192   /* power of two */

enum { K_OTHER = 0, K_INTERP, K_EVAL };

struct pcent {
    uintptr_t pc;
    const struct ps_symtab *tab;   /* the table func belongs to */
    uint32_t func;
    uint32_t objs_gen;
    uint8_t kind;
};

static struct pcent cache[PS_PCCACHE];
static uint32_t objs_gen = 1;

/* Outcomes of the native samples (PYSAMPLE_STATS), counted by the sampler
 * thread, read by whoever writes the statistics: relaxed atomics. */
enum { O_ROOT = 0, O_UNAVAILABLE, O_MISMATCH, O_N };
static _Atomic uint64_t outcomes[O_N], truncated_by[PS_STOP_N];

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

void ps_native_objects_changed(void)
{
    objs_gen++;
}

static uint32_t marker(struct ps_symtab *t, const char *s)
{
    return ps_sym_marker(t, s);
}

/* Name and kind of a native frame; a is the address looked up (a return
 * address minus one, so that a call at the very end of a function is
 * named after that function). */
static const struct pcent *resolve(struct ps_symtab *t, uintptr_t a)
{
    struct pcent *e = &cache[(a ^ (a >> 13)) & (PS_PCCACHE - 1)];
    if (e->pc == a && e->tab == t && e->objs_gen == objs_gen &&
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

int ps_native_merge(struct ps_symtab *t, enum ps_native_mode mode,
                    const struct ps_pyframe *py, int npy, const uintptr_t *pcs, int npcs,
                    int stop, const char *no_native_why, uint64_t *out, int cap)
{
    int native_truncated = stop != PS_STOP_ROOT;
    /* Groups of Python frames, innermost first: group g is
     * py[gstart[g] .. gend[g]]. */
    int gstart[PS_NATIVE_MAX], gend[PS_NATIVE_MAX], ng = 0;
    for (int i = 0; i < npy && ng < PS_NATIVE_MAX; i++) {
        if (i == 0 || py[i - 1].entry)
            gstart[ng] = i, gend[ng] = i, ng++;
        else
            gend[ng - 1] = i;
    }
    if (ng > 0)
        gend[ng - 1] = npy - 1;

    uint8_t kind[PS_NATIVE_MAX];
    uint32_t func[PS_NATIVE_MAX];
    int evals = 0, inner_eval = -1, outer_eval = -1;
    for (int i = 0; i < npcs && i < PS_NATIVE_MAX; i++) {
        const struct pcent *e = resolve(t, i == 0 ? pcs[i] : pcs[i] - 1);
        kind[i] = e->kind;
        func[i] = e->func;
        if (e->kind == K_EVAL) {
            if (inner_eval < 0)
                inner_eval = i;
            outer_eval = i;
            evals++;
        }
    }

    int d = 0;
    const char *why = no_native_why;
    if (why == NULL && npcs == 0)
        why = "[native: unavailable]";
    int outcome = O_UNAVAILABLE;
    if (why == NULL && (evals > ng || (!native_truncated && evals != ng))) {
        why = "[native: mismatch]";
        outcome = O_MISMATCH;
    }
    if (why != NULL) {
        count(&outcomes[outcome]);
        d = put_py(out, d, cap, py, 0, npy - 1);
        return put(out, d, cap, marker(t, why));
    }
    count(native_truncated ? &truncated_by[stop > 0 && stop < PS_STOP_N ? stop : PS_STOP_CFI]
                           : &outcomes[O_ROOT]);

    /* Groups the unwind did not reach (it stopped early). */
    if (evals < ng)
        d = put_py(out, d, cap, py, gstart[evals], npy - 1);
    if (native_truncated)
        d = put(out, d, cap, marker(t, "[native: truncated]"));
    int g = evals;   /* groups still to place, from the root */
    for (int i = npcs - 1; i >= 0; i--) {
        if (kind[i] == K_EVAL) {
            g--;
            d = put_py(out, d, cap, py, gstart[g], gend[g]);
            continue;
        }
        if (mode != PS_NATIVE_ALL && evals > 0) {
            if (i > outer_eval)
                continue;   /* thread start-up, interpreter start-up */
            if (i > inner_eval && kind[i] == K_INTERP)
                continue;   /* the interpreter between two Python frames */
        }
        d = put(out, d, cap, func[i]);
    }
    return d;
}

int ps_native_stats(char *buf, size_t len)
{
    uint64_t tr = 0;
    for (int i = 1; i < PS_STOP_N; i++)
        tr += atomic_load_explicit(&truncated_by[i], memory_order_relaxed);
    struct ps_unwind_counts u;
    ps_unwind_counts(&u);
    size_t n = 0;
    int m = snprintf(buf, len,
                     "native_root %llu\nnative_truncated %llu\nnative_unavailable %llu\n"
                     "native_mismatch %llu\nnative_rule_hits %llu\nnative_rule_misses %llu\n"
                     "native_fp_frames %llu\nnative_nocfi_frames %llu\nnative_signal_frames %llu\n"
                     "native_unwinds %llu\nnative_unwind_frames %llu\nnative_unwind_ns %llu\n",
                     (unsigned long long)atomic_load(&outcomes[O_ROOT]), (unsigned long long)tr,
                     (unsigned long long)atomic_load(&outcomes[O_UNAVAILABLE]),
                     (unsigned long long)atomic_load(&outcomes[O_MISMATCH]),
                     (unsigned long long)u.hits, (unsigned long long)u.misses,
                     (unsigned long long)u.fp_frames, (unsigned long long)u.nocfi_frames,
                     (unsigned long long)u.signal_frames,
                     (unsigned long long)u.walks, (unsigned long long)u.frames,
                     (unsigned long long)u.ns);
    for (int i = 1; m > 0 && (size_t)m < len - n && i < PS_STOP_N; i++) {
        n += (size_t)m;
        m = snprintf(buf + n, len - n, "native_truncated_%s %llu\n", stop_names[i],
                     (unsigned long long)atomic_load(&truncated_by[i]));
    }
    if (m < 0 || (size_t)m >= len - n)
        return 0;
    return (int)(n + (size_t)m);
}

void ps_native_stats_reset(void)
{
    ps_counters_zero(outcomes, O_N);
    ps_counters_zero(truncated_by, PS_STOP_N);
    ps_unwind_counts_reset();
}
