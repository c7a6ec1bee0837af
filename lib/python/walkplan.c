/*
 * walkplan.c - the walk's plan (walkplan.h), decided once per walk, and
 * the frame a thread's walk starts from (frames.h).  Nothing here runs per
 * frame: frames.c keeps the loop and what it inlines.
 */
#include "memory/memread.h"
#include "platform/platform.h"
#include "python/walkplan.h"
#include "util/tickpath.h"

PS_TICK_PATH int ps_thread_top_frame(const struct ps_python *py, const uint8_t *ts,
                                     uintptr_t *frame)
{
    const struct ps_layout *L = &py->L;
    if (L->ts_cframe == PS_NOFIELD) {
        *frame = ps_ptr_at(ts, L->ts_frame);
        return 0;
    }
    /* 3.11/3.12: tstate->cframe->current_frame */
    uintptr_t cf = ps_ptr_at(ts, L->ts_cframe);
    if (cf == 0) {
        *frame = 0;
        return 0;
    }
    return ps_read_ptr(cf + L->cf_current_frame, frame);
}

/* Whether a field of width bytes at off lies within a snapshot of n bytes
 * (an absent field, PS_NOFIELD, does not). */
static int within(uint32_t off, uint32_t width, uint32_t n)
{
    return off != PS_NOFIELD && (uint64_t)off + width <= n;
}

static inline uint32_t max32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

PS_TICK_PATH int ps_walk_plan_init(struct walk_plan *p, const struct ps_python *py,
                                   struct ps_codecache *cc, struct ps_symtab *syms, int lines)
{
    const struct ps_layout *L = &py->L;
    uint32_t pos_width = L->pos_kind == PS_POS_INSTR_PTR ? 8 : 4;
    if (L->fr_read > 512 || L->co_read > 1024 || !within(L->fr_back, 8, L->fr_read) ||
        !within(L->fr_code, 8, L->fr_read) || !within(L->fr_pos, pos_width, L->fr_read) ||
        !within(L->ob_type, 8, L->co_read) ||
        (L->fr_owner != PS_NOFIELD && !within(L->fr_owner, 1, L->fr_read)) ||
        (L->fr_is_entry != PS_NOFIELD && !within(L->fr_is_entry, 1, L->fr_read)))
        return PS_WALK_UNREADABLE;
    /* The code object's words (framecode.c), straight-line, once a walk
     * (with the scope, 125 instructions more a plan on 3.13.0, 166 -> 291,
     * what one code read saves; a loop over the nine cost 11 more): a
     * field the version lacks is read at ob_type's offset, then masked
     * (keep_), or not used (the two ints but with has_words).  All must
     * lie within co_read, as ps_read_words_in_scope needs: checked on the
     * largest (PS_NOFIELD, for one of the four that must be there, is
     * above any co_read). */
    const uint32_t t = L->ob_type;
    const uint32_t qualname = L->co_qualname != PS_NOFIELD ? L->co_qualname : t;
    const uint32_t nunits = L->co_nunits != PS_NOFIELD ? L->co_nunits : t;
    const uint32_t stacksize = L->co_stacksize != PS_NOFIELD ? L->co_stacksize : t;
    const uint32_t nlocalsplus = L->co_nlocalsplus != PS_NOFIELD ? L->co_nlocalsplus : t;
    uint32_t top = max32(max32(max32(L->co_linetable, L->co_filename),
                               max32(L->co_name, L->co_firstlineno)),
                         max32(max32(qualname, nunits), max32(stacksize, nlocalsplus)));
    if ((uint64_t)top + 8 > L->co_read)
        return PS_WALK_UNREADABLE;
    int interp = L->frame_kind == PS_FRAMES_INTERP, owner = L->fr_owner != PS_NOFIELD;
    /* frame_words() below: all four are needed for a frame's size. */
    int has_words = L->co_stacksize != PS_NOFIELD && L->co_nlocalsplus != PS_NOFIELD &&
                    L->fr_specials != PS_NOFIELD && owner;
    *p = (struct walk_plan){
        .py = py, .cc = cc, .syms = syms, .lines = lines,
        .fr_read = L->fr_read, .co_read = L->co_read, .fr_back = L->fr_back,
        .fr_code = L->fr_code, .fr_pos = L->fr_pos, .ob_type = L->ob_type,
        .fr_is_entry = L->fr_is_entry, .code_tag_mask = L->code_tag_mask,
        .code_type = py->code_type,
        /* No owner field (3.9/3.10): byte 0 against a bound no int8 reaches. */
        .fr_owner = owner ? L->fr_owner : 0, .first_native = owner ? L->owner_first_native : 128,
        .co_word = {
            [PS_CODE_LINETABLE] = L->co_linetable, [PS_CODE_FILENAME] = L->co_filename,
            [PS_CODE_NAME] = L->co_name, [PS_CODE_QUALNAME] = qualname,
            [PS_CODE_NUNITS] = nunits, [PS_CODE_FIRSTLINENO] = L->co_firstlineno,
            [CW_TYPE] = t, [CW_STACKSIZE] = stacksize, [CW_NLOCALSPLUS] = nlocalsplus,
        },
        .keep_qualname = L->co_qualname != PS_NOFIELD ? ~(uint64_t)0 : 0,
        .keep_nunits = L->co_nunits != PS_NOFIELD ? ~(uint64_t)0 : 0,
        .co_lacks = L->co_qualname == PS_NOFIELD || L->co_nunits == PS_NOFIELD,
        .scope = ps_read_scope_held(),
        .specials_words = has_words ? L->fr_specials / 8u : 0, .has_words = (uint8_t)has_words,
        .co_code_adaptive = L->co_code_adaptive,
        .objects = L->frame_kind == PS_FRAMES_OBJECT, .interp = (uint8_t)interp,
        .rootless_torn = interp && L->minor >= 12, .none_is_entry = interp && L->minor >= 13,
        .wide_ok = interp && !ps_plat_walk_reads_copy,
        .batch = L->frame_kind == PS_FRAMES_OBJECT && !ps_plat_walk_reads_copy,
        .pos_kind = (uint8_t)L->pos_kind,
        .tlbc = L->fr_tlbc_index != PS_NOFIELD && L->co_tlbc != PS_NOFIELD,
    };
    return 0;
}

int ps_walk_plan_make(struct walk_plan *p, const struct ps_python *py)
{
    int rc = ps_walk_plan_init(p, py, NULL, NULL, 0);
    if (rc != 0)
        *p = (struct walk_plan){ .py = NULL };
    p->scope = NULL;  /* each walk takes its own (ps_walk_plan_take) */
    return rc;
}

PS_TICK_PATH int ps_walk_plan_take(struct walk_plan *p, const struct ps_walk_req *rq)
{
    if (rq->plan == NULL || rq->plan->py == NULL || rq->plan->py != rq->py)
        return ps_walk_plan_init(p, rq->py, rq->cc, rq->syms, rq->lines);
    *p = *rq->plan;
    p->cc = rq->cc;
    p->syms = rq->syms;
    p->lines = rq->lines;
    /* The scope is the walk's own (ps_walk's), never the one, if any,
     * held where the plan was made. */
    p->scope = ps_read_scope_held();
    return 0;
}
