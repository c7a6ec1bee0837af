/*
 * walkplan.h - what frames.c's walk takes of the layout, once per walk
 * (walkplan.c), and where a thread's walk starts.  Internal to the walk:
 * frames.h is its public face.
 */
#ifndef PS_WALKPLAN_H
#define PS_WALKPLAN_H

#include <stdint.h>

#include "memory/memread.h"
#include "python/codecache.h"
#include "python/frames.h"

/* The words of a code object the walk reads (framecode.c), their order
 * in walk_plan.co_word: the identity (codecache.h, enum ps_code_word),
 * then the type and the two ints of a frame's size (3.11+). */
enum {
    CW_TYPE = PS_CODE_ID_WORDS, CW_STACKSIZE, CW_NLOCALSPLUS,
    CW_COUNT
};

/*
 * The walk's plan: what the walk and resolve() use of the layout, taken
 * once per walk.  The layout's "no such field" cases are decided here, not
 * per frame: a flag, or an offset and bound that make the per-frame test
 * come out as it would have (no owner field: byte 0 against a bound no
 * int8 reaches).  The plan lives on the walk's stack and its address is
 * only passed down, so the compiler keeps its fields where it likes; the
 * layout itself sits behind a pointer that every store to out[] may alias
 * (-fno-strict-aliasing), so each L->x was loaded and tested again on
 * every frame.  What is checked per frame is unchanged.
 */
struct walk_plan {
    const struct ps_python *py;
    struct ps_codecache *cc;
    struct ps_symtab *syms;
    int lines;
    uint32_t fr_read, co_read;     /* bytes copied per frame / code object */
    uint32_t fr_back, fr_code, fr_pos, fr_owner, ob_type;
    uint32_t fr_is_entry;          /* PS_NOFIELD but on 3.11 */
    int first_native;              /* owner >= this: not a Python frame (128: never) */
    uintptr_t code_tag_mask, code_type;
    uint32_t co_code_adaptive;
    /* Offsets of the code object's words (CW_*, PS_CODE_*), each within
     * co_read; a field the version lacks is read at ob_type's, and its
     * word then masked to 0 (keep_: ~0 where the field exists; of the
     * identity's, only co_qualname and ob_size may be missing). */
    uint32_t co_word[CW_COUNT];
    uint64_t keep_qualname, keep_nunits;
    uint8_t co_lacks;              /* either is missing (3.9/3.10): mask them */
    /* The walk's read scope (ps_read_scope_held, taken with the plan, in
     * ps_walk's scope), or NULL: the code objects' reads (framecode.c). */
    sigjmp_buf *scope;
    uint64_t specials_words;       /* FRAME_SPECIALS_SIZE in words */
    uint8_t objects;               /* 3.9/3.10: frame objects, refcount checks */
    uint8_t interp;                /* 3.11+: data-stack frames */
    uint8_t has_words;             /* a frame's size is known (3.11+) */
    uint8_t rootless_torn;         /* 3.12+: a Python frame with no previous is torn */
    uint8_t none_is_entry;         /* 3.13+: an executable that is not code is an entry frame */
    uint8_t wide_ok;               /* span reads (3.11+, not on a suspended copy) */
    uint8_t batch;                 /* frames copied in batches (3.9/3.10, likewise) */
    uint8_t pos_kind;              /* enum ps_pos_kind */
    uint8_t tlbc;                  /* 3.14t: thread-local bytecode copies */
};

/* Fills *p.  0, or PS_WALK_UNREADABLE for a layout the walk cannot use
 * (sizes beyond its buffers; a frame without its link, code or position,
 * or one of the fields read per frame outside the bytes copied). */
int ps_walk_plan_init(struct walk_plan *p, const struct ps_python *py, struct ps_codecache *cc,
                      struct ps_symtab *syms, int lines);

/*
 * The layout's part of the plan, made once for py (the sampler's, at
 * set-up: ps_walk_req.plan), so that a walk copies its 176 bytes rather
 * than reading the layout's fields over its lines and deciding each again
 * (291 instructions a walk on 3.13.0 with the code object's words, 166
 * before them).  0, or what ps_walk_plan_init returned: *p then has no py
 * and no walk takes it (ps_walk_plan_take).  It holds no read scope.
 */
int ps_walk_plan_make(struct walk_plan *p, const struct ps_python *py);

/* The walk's plan, on its stack: rq's made plan with rq's code cache,
 * symbols and lines and the walk's read scope, where it was made for
 * rq->py; else made now from the layout.  The same plan either way, and the same 0 or error.  Out of
 * line, as ps_walk_plan_init is: copied inline, the walk's loop lost two
 * registers (2 instructions a frame). */
int ps_walk_plan_take(struct walk_plan *p, const struct ps_walk_req *rq);

#endif
