/*
 * framecode.c - the code object behind a frame (framecode.h): read once
 * for the frames of a walk copied before that read, recognised by its
 * type, resolved through the code cache, and kept in the walk's table;
 * and where a 3.14t thread runs its own copy of the bytecode.  A miss of
 * the walk's table comes here, out of line: most frames of a deep walk
 * never do.
 */
#include <string.h>

#include "python/framecode.h"
#include "memory/memread.h"
#include "util/tickpath.h"

/* 3.14t: the thread may run its own copy of the bytecode.  Out of line:
 * only a frame whose pointer is not in the code's own bytecode gets here. */
__attribute__((noinline)) int64_t ps_framecode_tlbc_addr(const struct ps_layout *L, uintptr_t code,
                                                         const uint8_t *fr, uintptr_t ip,
                                                         int64_t n)
{
    int32_t idx;
    uintptr_t arr, entry;
    int64_t size;
    memcpy(&idx, fr + L->fr_tlbc_index, sizeof idx);
    if (ps_read_ptr(code + L->co_tlbc, &arr) == 0 && arr != 0 &&
        ps_read(&size, arr, sizeof size) == 0 && idx >= 0 && idx < size && size < 4096 &&
        ps_read_ptr(arr + 8 + 8 * (uintptr_t)idx, &entry) == 0 &&
        ip + 2 >= entry && ip < entry + 2 * (uint64_t)n)
        return ((int64_t)ip - (int64_t)entry) / 2;
    return INT64_MIN;
}

/* The other slot of the code object in slot k (framecode.h, code_slot2). */
static size_t other_slot(uintptr_t code, size_t k)
{
    uint64_t h = code_hash(code);
    return code_slot(h) == k ? code_slot2(h) : code_slot(h);
}

/* Where code's entry goes in wc: its own slot or an empty one of its
 * two; else one of them emptied by moving its occupant to that one's
 * other slot if empty (the older occupant tried first); else the slot of
 * the one read earlier (the likelier to serve no frame now).  Without the
 * move, three code objects of a recursion whose slots overlap so took
 * turns, and each of their frames read its code object. */
static size_t slot_for(struct walk_codes *wc, uintptr_t code)
{
    uint64_t h = code_hash(code);
    size_t i = code_slot(h);
    if (wc->code[i] == code || wc->code[i] == 0)
        return i;
    size_t j = code_slot2(h);
    if (wc->code[j] == code || wc->code[j] == 0)
        return j;
    /* Both taken: the older occupant first, then the other. */
    size_t older = wc->slot[j].read_no < wc->slot[i].read_no ? j : i;
    size_t pair[2] = { older, older == i ? j : i };
    for (int n = 0; n < 2; n++) {
        size_t k = pair[n], to = other_slot(wc->code[k], k);
        if (wc->code[to] == 0) {
            wc->code[to] = wc->code[k];
            wc->slot[to] = wc->slot[k];
            return k;
        }
    }
    return older;
}

/* Words a frame of the code whose words are w takes on the data stack
 * (3.11+: FRAME_SPECIALS_SIZE, the words before localsplus, + co_nlocalsplus
 * + co_stacksize, which is co_framesize where that exists), or 0 where there
 * is no data stack (3.9/3.10). */
static inline uint64_t frame_words(const struct walk_plan *p, const uint64_t *w)
{
    if (!p->has_words)
        return 0;
    int32_t stacksize = ps_code_lo32(w[CW_STACKSIZE]);
    int32_t nlocalsplus = ps_code_lo32(w[CW_NLOCALSPLUS]);
    if (stacksize < 0 || nlocalsplus < 0)
        return 0;
    return p->specials_words + (uint64_t)stacksize + (uint64_t)nlocalsplus;
}

/* The rest of ps_framecode_read where its own path found no entry: the
 * cache's hit path found none (hit_tried: a miss, refilled), or, with wc,
 * the code object's two slots are both taken by others and the hit path
 * was not tried yet.  Keeps code's entry in wc where slot_for says. */
static __attribute__((noinline)) int framecode_miss(const struct walk_plan *p,
                                                    struct walk_codes *wc, uintptr_t code,
                                                    const uint64_t *w, uint64_t n,
                                                    struct ps_code_entry **cep, int hit_tried)
{
    struct ps_code_entry *ce =
        hit_tried ? ps_code_miss_words(p->cc, p->py, p->syms, p->lines, code, w)
                  : ps_code_resolve_words(p->cc, p->py, p->syms, p->lines, code, w);
    if (ce == NULL)
        return PS_WALK_UNREADABLE;
    if (wc != NULL) {
        size_t i = slot_for(wc, code);
        wc->code[i] = code;
        wc->slot[i] = (struct walk_code){ .read_no = ++wc->reads, .ce = ce, .words = n };
    }
    *cep = ce;
    return 1;
}

PS_TICK_PATH __attribute__((noinline)) int ps_framecode_read(const struct walk_plan *p,
                                                          struct walk_codes *wc, uintptr_t code,
                                                          struct ps_code_entry **cep,
                                                          uint64_t *words)
{
    _Static_assert(CW_COUNT == PS_WORDS, "a code object is read in one ps_read_words_in_scope");
    uint64_t w[CW_COUNT];
    if (ps_read_words_in_scope(w, code, p->co_read, p->co_word, p->scope) != 0)
        return PS_WALK_UNREADABLE;
    if (w[CW_TYPE] != p->code_type) {
        /* 3.13+ entry frames hold None; elsewhere this is a frame that
         * was popped and reused while we looked. */
        return p->none_is_entry ? 0 : PS_WALK_INCONSISTENT;
    }
    if (p->co_lacks) {
        w[PS_CODE_QUALNAME] &= p->keep_qualname;
        w[PS_CODE_NUNITS] &= p->keep_nunits;
    }
    uint64_t n = frame_words(p, w);
    *words = n;
    struct ps_code_entry *ce;
    if (wc == NULL) {
        /* 3.9/3.10's first frames, read one at a time, and a frame on
         * its own: no slot, the cache's hit path. */
        ce = ps_code_hit(p->cc, code, w);
        if (ce == NULL)
            return framecode_miss(p, wc, code, w, n, cep, 1);
        p->cc->hits++;
        *cep = ce;
        return 1;
    }
    /* Its slot: its own or an empty one of its two (else the miss path
     * makes room: slot_for). */
    uint64_t h = code_hash(code);
    size_t i = code_slot(h);
    if (wc->code[i] != code && wc->code[i] != 0) {
        i = code_slot2(h);
        if (wc->code[i] != code && wc->code[i] != 0)
            return framecode_miss(p, wc, code, w, n, cep, 0);
    }
    ce = wc->code[i] == code ? wc->slot[i].ce : NULL;
    if (ce == NULL || !ps_code_same(ce, code, w)) {
        ce = ps_code_hit(p->cc, code, w);
        if (ce == NULL)
            return framecode_miss(p, wc, code, w, n, cep, 1);
    }
    p->cc->hits++;
    wc->code[i] = code;
    wc->slot[i] = (struct walk_code){ .read_no = ++wc->reads, .ce = ce, .words = n };
    *cep = ce;
    return 1;
}
