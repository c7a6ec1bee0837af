/*
 * native.c - one stack out of a native unwind and a Python walk.
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
#include <stdio.h>
#include <string.h>

#include "native.h"
#include "symtab.h"

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
                    int native_truncated, const char *no_native_why, uint64_t *out, int cap)
{
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
    if (why == NULL && (evals > ng || (!native_truncated && evals != ng)))
        why = "[native: mismatch]";
    if (why != NULL) {
        d = put_py(out, d, cap, py, 0, npy - 1);
        return put(out, d, cap, marker(t, why));
    }

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
