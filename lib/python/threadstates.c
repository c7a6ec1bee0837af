/*
 * threadstates.c - walking the runtime's interpreters and their thread
 * states (threadstates.h), through ps_read() only: no HEAD_LOCK, so every
 * link is checked before it is followed and every list is bounded.
 */
#include <string.h>

#include "memory/memread.h"
#include "python/frames.h"
#include "python/threadstates.h"
#include "util/tickpath.h"

PS_TICK_PATH int ps_tstates_begin_at(struct ps_tstate_iter *it, const struct ps_python *py,
                                     uintptr_t head)
{
    memset(it, 0, sizeof *it);
    it->py = py;
    if (py->L.ts_read > PS_TS_MAX)
        return -1;
    it->next_interp = head;
    return 0;
}

int ps_tstates_begin(struct ps_tstate_iter *it, const struct ps_python *py)
{
    uintptr_t head;
    if (ps_read_ptr(py->runtime + py->L.rt_interp_head, &head) != 0)
        head = 0;
    return ps_tstates_begin_at(it, py, head);
}

/* Fields of an interpreter read together when they lie within this many
 * bytes: next, threads.head and id are 32 (3.9), 56 (3.11) and 88 (3.13)
 * bytes from first to last, on the same one or two lines either way. */
#define PS_IS_HEADS_SPAN 128

/* it->interp's first thread state, the next interpreter and the id (-1
 * where the layout has none: is_id 0 is next's place, not an id's).  One
 * read where the three lie within PS_IS_HEADS_SPAN bytes (each ps_read()
 * is ~125 instructions), else one each as before.  0, or -1 if the list's
 * links cannot be read. */
static int interp_heads(struct ps_tstate_iter *it, const struct ps_layout *L)
{
    uint32_t head = L->is_threads_head, next = L->is_next, id = L->is_id;
    int has_id = id != PS_NOFIELD && id != 0;
    uint32_t lo = head < next ? head : next, hi = (head < next ? next : head) + 8;
    if (has_id && id < lo)
        lo = id;
    if (has_id && id + 8 > hi)
        hi = id + 8;
    if (hi - lo <= PS_IS_HEADS_SPAN) {
        uint8_t buf[PS_IS_HEADS_SPAN];
        if (ps_read(buf, it->interp + lo, hi - lo) != 0)
            return -1;
        memcpy(&it->tsp, buf + (head - lo), sizeof it->tsp);
        memcpy(&it->next_interp, buf + (next - lo), sizeof it->next_interp);
        if (has_id)
            memcpy(&it->interp_id, buf + (id - lo), sizeof it->interp_id);
        return 0;
    }
    if (ps_read_ptr(it->interp + head, &it->tsp) != 0 ||
        ps_read_ptr(it->interp + next, &it->next_interp) != 0)
        return -1;
    if (has_id && ps_read(&it->interp_id, it->interp + id, sizeof it->interp_id) != 0)
        it->interp_id = -1;
    return 0;
}

/* Moves to the next interpreter's first thread state; 0 if there is none. */
static int next_interp(struct ps_tstate_iter *it)
{
    it->interp = it->next_interp;
    it->tsp = 0;
    it->nthreads = 0;
    it->interp_id = -1;
    if (it->interp == 0 || it->ninterps++ >= PS_MAX_INTERPS)
        return 0;
    if (interp_heads(it, &it->py->L) != 0) {
        it->tsp = 0;
        it->next_interp = 0;
        return 0;
    }
    return 1;
}

PS_TICK_PATH uintptr_t ps_tstates_next(struct ps_tstate_iter *it, uint8_t *ts)
{
    const struct ps_layout *L = &it->py->L;
    if (it->py == NULL)
        return 0;
    for (;;) {
        while (it->tsp == 0 || it->nthreads >= PS_MAX_THREADS) {
            if (!next_interp(it)) {
                it->py = NULL;
                return 0;
            }
        }
        uintptr_t tsp = it->tsp, back;
        it->nthreads++;
        if (ps_read(ts, tsp, L->ts_read) != 0) {
            it->tsp = 0;
            continue;
        }
        memcpy(&back, ts + L->ts_interp, sizeof back);
        if (back != it->interp) {
            it->torn++;
            it->tsp = 0;
            continue;
        }
        memcpy(&it->tsp, ts + L->ts_next, sizeof it->tsp);
        return tsp;
    }
}

/*
 * ps_python_position (threadstates.h): every thread state's innermost
 * frame and its position in it, hashed (FNV-1a).  Reads may fail while the
 * sampler reads too (pipe and file paths): the value then differs, which
 * the caller must take as "ran code", the harmless answer.
 */
uint64_t ps_python_position(const struct ps_python *py)
{
    const struct ps_layout *L = &py->L;
    uint8_t ts[PS_TS_MAX];
    uint64_t h = 1469598103934665603ull;
    struct ps_tstate_iter it;
    if (ps_tstates_begin(&it, py) != 0)
        return 0;
    uintptr_t tsp;
    while ((tsp = ps_tstates_next(&it, ts)) != 0) {
        uintptr_t frame = 0, pos = 0;
        if (ps_thread_top_frame(py, ts, &frame) == 0 && frame != 0)
            ps_read(&pos, frame + L->fr_pos, sizeof pos);
        h = (h ^ tsp) * 1099511628211ull;
        h = (h ^ frame) * 1099511628211ull;
        h = (h ^ pos) * 1099511628211ull;
    }
    return h;
}
