/*
 * framecopy.c - what is copied of a thread while it is stopped, where the
 * platform stops threads to read them (macOS; framecopy.h).  The platform
 * stops and resumes the thread and records the reads made meanwhile
 * (platform.h: ps_thread_suspend; darwin/suspend.c, darwin/read.c); this
 * file knows which addresses the walk will want.
 *
 * For each Python thread, each tick:
 *   1. ps_thread_suspend(): the thread is off the CPU, its stores complete,
 *      with room reserved for every read of step 2, and every ps_read() of
 *      ours recorded from now on.
 *   2. Its thread state, the frame it leads to, and each frame of the
 *      chain are read, following the back links by the walk's own rules
 *      and exactly as far as the walk may go (frames.h: ps_walk_budget,
 *      ps_frame_addr_ok, ps_frame_back).  On 3.11+ frames sit next to each
 *      other on the thread's data stack, so each read also takes up to
 *      SPAN bytes below the frame (never below its page, which is readable
 *      if the frame is): the older frames are then usually already in the
 *      copy, and a 20-frame stack costs two or three reads instead of
 *      twenty.
 *   3. ps_thread_resume(): the thread runs on, and the copy is served.
 *   4. The ordinary walk (frames.c) reads the frames from the copy;
 *      resolving a new code object may allocate, which is now safe.
 *      ps_framecopy_end() turns the copy off.
 *
 * Between 1 and 3 nothing may take a lock the stopped thread might hold,
 * or we wait for it forever: no malloc, no printf, no symbol bound lazily
 * (dyld's lock), no pthread call that locks.  What runs there from here is
 * copy_chain() and what it calls: this file's code and memcpy into the
 * take's buffer (on the sampler thread's stack); ps_read() (memread.c: atomics, then the platform's
 * recorded read); walkplan.c's ps_thread_top_frame (pure code and
 * ps_read); the inline link rules of frames.h.  Whatever needs memory or
 * the C library is done before step 1: the room (ps_thread_suspend), the
 * page size.  darwin/suspend.c's header says what the platform runs in
 * the same window, and how the symbols used there are bound beforehand.
 */
#include <string.h>
#include <unistd.h>

#include "memory/memread.h"
#include "python/framecopy.h"
#include "python/frames.h"

#define SPAN 4096               /* bytes read below a 3.11+ frame, same page */
#define SPAN_ROOM (64 * 1024)   /* span bytes per copy, at most */
#define FRAME_MAX 512           /* the most of a frame a walk reads (walkplan.c) */

/* The spans of the copy being taken: the last one read is [lo, hi) in
 * buf (lo == hi: none), used bytes of SPAN_ROOM are spent.  One take's,
 * on the sampler thread's stack (ps_framecopy_take): the copy is taken
 * while a thread is stopped, where nothing may allocate, and nothing of
 * it is kept to the next. */
struct spans {
    uintptr_t lo, hi;
    size_t used;
    unsigned char buf[SPAN + FRAME_MAX];
};
/* ~(page size - 1), once known: the machine's, the same for every thread
 * (written once, by the sampler thread; a fork child's is the parent's). */
static uintptr_t page_mask;

/* The page size, asked of the C library before the first stop (not
 * inside it: a first call may bind the symbol lazily). */
static void know_page(void)
{
    if (page_mask == 0) {
        long size = sysconf(_SC_PAGESIZE);
        /* Unknown: 4096, which every page size is a multiple of. */
        page_mask = ~((uintptr_t)(size > 0 ? size : 4096) - 1);
    }
}

/* Room for every read copy_chain may make: a frame per step of the walk's
 * budget, the spans, the thread state, and the few reads around it
 * (3.11/3.12's cframe). */
static void room(const struct ps_layout *L, size_t frames, size_t *reads, size_t *bytes)
{
    int spans = L->frame_kind == PS_FRAMES_INTERP;
    *reads = frames + SPAN_ROOM / SPAN + 8;
    *bytes = frames * L->fr_read + L->ts_read + 64 + (spans ? SPAN_ROOM : 0);
}

/* n bytes at addr lie in the last span read. */
static int in_span(const struct spans *sp, uintptr_t addr, size_t n)
{
    return sp->lo < sp->hi && addr >= sp->lo && addr <= sp->hi && n <= sp->hi - addr;
}

/* Reads [lo, frame + n) in one recorded read, lo as far as SPAN below the
 * frame within its page: on 3.11+ the older frames usually lie there.
 * While SPAN_ROOM lasts (the room reserved for spans); a failed read is
 * fine, the frame is then read alone.  n <= FRAME_MAX, so it fits buf. */
static void read_span(struct spans *sp, uintptr_t frame, size_t n)
{
    uintptr_t page = frame & page_mask;
    uintptr_t lo = frame - page > SPAN ? frame - SPAN : page;
    size_t len = (size_t)(frame - lo) + n;
    if (sp->used + SPAN + n > SPAN_ROOM)
        return;
    sp->used += SPAN + n;
    sp->lo = sp->hi = 0;   /* a failed read may have left buf half written */
    if (ps_read(sp->buf, lo, len) == 0) {
        sp->lo = lo;
        sp->hi = lo + len;
    }
}

/* The frame at frame (n bytes) into fr: from the last span, from a new
 * span (3.11+), else read alone.  0, or -1 if it cannot be read. */
static int copy_frame(struct spans *sp, uint8_t *fr, uintptr_t frame, size_t n)
{
    if (sp != NULL && !in_span(sp, frame, n))
        read_span(sp, frame, n);
    if (sp != NULL && in_span(sp, frame, n)) {
        memcpy(fr, sp->buf + (frame - sp->lo), n);
        return 0;
    }
    return ps_read(fr, frame, n);
}

/*
 * Step 2, while the thread is stopped: its thread state into ts, then the
 * chain from its top frame by the walk's rules, budget links at most.  A
 * chain that cannot be followed further just ends the copy (the walk will
 * find out what it makes of it).  0, or -1 if the thread state could not
 * be read.
 */
static int copy_chain(struct spans *sp, const struct ps_python *py, uintptr_t tsp, uint8_t *ts,
                      size_t budget)
{
    const struct ps_layout *L = &py->L;
    if (L->frame_kind != PS_FRAMES_INTERP)
        sp = NULL;   /* frames are not side by side: read alone */
    uint8_t fr[FRAME_MAX];
    uintptr_t frame;
    if (ps_read(ts, tsp, L->ts_read) != 0)
        return -1;
    if (ps_thread_top_frame(py, ts, &frame) != 0)
        return 0;
    for (; frame != 0 && budget > 0; budget--) {
        if (!ps_frame_addr_ok(frame) || copy_frame(sp, fr, frame, L->fr_read) != 0)
            break;
        uintptr_t back = ps_frame_back(L, fr);
        if (back == frame)
            break;
        frame = back;
    }
    return 0;
}

int ps_framecopy_take(const struct ps_python *py, long tid, uintptr_t tsp, uint8_t *ts,
                      int max_frames)
{
    const struct ps_layout *L = &py->L;
    if (L->fr_read > FRAME_MAX || max_frames < 0) {
        /* A layout no walk can use: walked live (and refused there).  A
         * thread held for its native stack is let go first, since the
         * walk may allocate. */
        ps_thread_copy_end();
        return 0;
    }
    size_t frames = (size_t)ps_walk_budget(max_frames), reads, bytes;
    room(L, frames, &reads, &bytes);
    know_page();
    struct spans sp;
    sp.lo = sp.hi = 0;
    sp.used = 0;
    int stopped = ps_thread_suspend(tid, reads, bytes);
    if (stopped != 0)
        return stopped > 0 ? 0 : -1;   /* read live, or the thread has ended */
    /* --- stopped: nothing below may allocate or lock (header) ---------- */
    int ts_ok = copy_chain(&sp, py, tsp, ts, frames) == 0;
    ps_thread_resume(ts_ok);
    /* --- running again ------------------------------------------------- */
    return ts_ok ? 0 : -1;   /* its thread state is gone: nothing to walk */
}
