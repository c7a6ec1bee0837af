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
        .co_stacksize = L->co_stacksize, .co_nlocalsplus = L->co_nlocalsplus,
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
