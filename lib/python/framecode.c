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

/* Words a frame of the code whose snapshot is co takes on the data stack
 * (3.11+: FRAME_SPECIALS_SIZE, the words before localsplus, + co_nlocalsplus
 * + co_stacksize, which is co_framesize where that exists), or 0 where there
 * is no data stack (3.9/3.10). */
static uint64_t frame_words(const struct walk_plan *p, const uint8_t *co)
{
    int32_t stacksize, nlocalsplus;
    if (!p->has_words)
        return 0;
    memcpy(&stacksize, co + p->co_stacksize, sizeof stacksize);
    memcpy(&nlocalsplus, co + p->co_nlocalsplus, sizeof nlocalsplus);
    if (stacksize < 0 || nlocalsplus < 0)
        return 0;
    return p->specials_words + (uint64_t)stacksize + (uint64_t)nlocalsplus;
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

/* Keeps code's entry in wc, where slot_for says. */
static void code_checked(struct walk_codes *wc, uintptr_t code, struct ps_code_entry *ce,
                         uint64_t words, uint64_t read_no)
{
    if (wc == NULL)
        return;
    size_t i = slot_for(wc, code);
    wc->code[i] = code;
    wc->slot[i] = (struct walk_code){ .read_no = read_no, .ce = ce, .words = words };
}

/* The code object at code, read now (after the frame that points to it
 * was copied): 1 with *cep and *words set, 0 for an entry frame's None
 * (3.13+), or a PS_WALK_ error.  Out of line: in a deep walk most frames
 * are served by walk_codes, and its 1 KiB buffer stays off the walk's
 * stack. */
PS_TICK_PATH __attribute__((noinline)) int ps_framecode_read(const struct walk_plan *p, struct walk_codes *wc,
                                                uintptr_t code, struct ps_code_entry **cep,
                                                uint64_t *words)
{
    uint8_t co[1024];
    uintptr_t type;
    if (ps_read_in_scope(co, code, p->co_read) != 0)
        return PS_WALK_UNREADABLE;
    uint64_t read_no = wc != NULL ? ++wc->reads : 0;
    memcpy(&type, co + p->ob_type, sizeof type);
    if (type != p->code_type) {
        /* 3.13+ entry frames hold None; elsewhere this is a frame that
         * was popped and reused while we looked. */
        return p->none_is_entry ? 0 : PS_WALK_INCONSISTENT;
    }
    *words = frame_words(p, co);
    *cep = ps_code_resolve(p->cc, p->py, p->syms, p->lines, code, co);
    if (*cep == NULL)
        return PS_WALK_UNREADABLE;
    code_checked(wc, code, *cep, *words, read_no);
    return 1;
}
