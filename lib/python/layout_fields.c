/*
 * layout_fields.c - what each offset of struct ps_layout is (layout.h):
 * one description for both layout sources.
 */
#include <stddef.h>

#include "python/layout.h"

#define F(field, struct_, width, snap, name) \
    { name, offsetof(struct ps_layout, field), struct_, width, snap }

const struct ps_field_desc ps_fields[PS_F_COUNT] = {
    [PS_F_RT_FINALIZING] = F(rt_finalizing, PS_S_RUNTIME, 8, 0, "runtime.finalizing"),
    [PS_F_RT_INTERP_HEAD] = F(rt_interp_head, PS_S_RUNTIME, 8, 0, "runtime.interpreters_head"),
    [PS_F_RT_GIL] = F(rt_gil, PS_S_RUNTIME, 8, 0, "runtime.ceval.gil"),
    [PS_F_IS_NEXT] = F(is_next, PS_S_INTERP, 8, 0, "interp.next"),
    [PS_F_IS_THREADS_HEAD] = F(is_threads_head, PS_S_INTERP, 8, 0, "interp.threads_head"),
    [PS_F_IS_ID] = F(is_id, PS_S_INTERP, 8, 0, "interp.id"),
    [PS_F_IS_MODULES] = F(is_modules, PS_S_INTERP, 8, 0, "interp.imports_modules"),
    [PS_F_IS_CEVAL_GIL] = F(is_ceval_gil, PS_S_INTERP, 8, 0, "interp.ceval_gil"),
    /* struct _gc_runtime_state: its 'collecting' lies gc_collecting bytes in */
    [PS_F_IS_GC] = F(is_gc, PS_S_INTERP, 8, 0, "interp.gc"),
    [PS_F_TS_NEXT] = F(ts_next, PS_S_TSTATE, 8, 1, "tstate.next"),
    [PS_F_TS_INTERP] = F(ts_interp, PS_S_TSTATE, 8, 1, "tstate.interp"),
    [PS_F_TS_FRAME] = F(ts_frame, PS_S_TSTATE, 8, 1, "tstate.current_frame"),
    [PS_F_TS_THREAD_ID] = F(ts_thread_id, PS_S_TSTATE, 8, 1, "tstate.thread_id"),
    [PS_F_TS_NATIVE_ID] = F(ts_native_id, PS_S_TSTATE, 8, 1, "tstate.native_thread_id"),
    [PS_F_TS_CFRAME] = F(ts_cframe, PS_S_TSTATE, 8, 1, "tstate.cframe"),
    [PS_F_CF_CURRENT_FRAME] = F(cf_current_frame, PS_S_CFRAME, 8, 0, "cframe.current_frame"),
    [PS_F_FR_BACK] = F(fr_back, PS_S_FRAME, 8, 1, "frame.previous"),
    [PS_F_FR_CODE] = F(fr_code, PS_S_FRAME, 8, 1, "frame.executable"),
    [PS_F_FR_POS] = F(fr_pos, PS_S_FRAME, 8, 1, "frame.instr_ptr"),
    [PS_F_FR_OWNER] = F(fr_owner, PS_S_FRAME, 1, 1, "frame.owner"),
    [PS_F_FR_TLBC_INDEX] = F(fr_tlbc_index, PS_S_FRAME, 4, 1, "frame.tlbc_index"),
    /* 3.11: the first frame of its evaluation-loop call (merge.c) */
    [PS_F_FR_IS_ENTRY] = F(fr_is_entry, PS_S_FRAME, 1, 1, "frame.is_entry"),
    /* the type is read from the code object's snapshot */
    [PS_F_OB_TYPE] = F(ob_type, PS_S_OBJECT, 8, 1, "object.ob_type"),
    [PS_F_CO_FILENAME] = F(co_filename, PS_S_CODE, 8, 1, "code.co_filename"),
    [PS_F_CO_NAME] = F(co_name, PS_S_CODE, 8, 1, "code.co_name"),
    [PS_F_CO_QUALNAME] = F(co_qualname, PS_S_CODE, 8, 1, "code.co_qualname"),
    [PS_F_CO_LINETABLE] = F(co_linetable, PS_S_CODE, 8, 1, "code.co_linetable"),
    [PS_F_CO_FIRSTLINENO] = F(co_firstlineno, PS_S_CODE, 4, 1, "code.co_firstlineno"),
    [PS_F_CO_NUNITS] = F(co_nunits, PS_S_CODE, 8, 1, "code.ob_size"),
    [PS_F_CO_CODE_ADAPTIVE] = F(co_code_adaptive, PS_S_CODE, 2, 0, "code.co_code_adaptive"),
    [PS_F_CO_TLBC] = F(co_tlbc, PS_S_CODE, 8, 1, "code.co_tlbc"),
    /* 3.11+: a frame's size on the data stack (frames.c) */
    [PS_F_CO_STACKSIZE] = F(co_stacksize, PS_S_CODE, 4, 1, "code.co_stacksize"),
    [PS_F_CO_NLOCALSPLUS] = F(co_nlocalsplus, PS_S_CODE, 4, 1, "code.co_nlocalsplus"),
    [PS_F_BYTES_SIZE] = F(bytes_size, PS_S_BYTES, 8, 0, "bytes.ob_size"),
    [PS_F_BYTES_SVAL] = F(bytes_sval, PS_S_BYTES, 1, 0, "bytes.ob_sval"),
    [PS_F_STR_LENGTH] = F(str_length, PS_S_STR, 8, 0, "str.length"),
    [PS_F_STR_STATE] = F(str_state, PS_S_STR, 4, 0, "str.state"),
};

void ps_layout_spans(struct ps_layout *l)
{
    uint32_t end[PS_S_COUNT] = { 0 };
    for (int f = 0; f < PS_F_COUNT; f++) {
        uint32_t off = ps_layout_get(l, (enum ps_field)f);
        /* the object header is read as part of the code object */
        enum ps_struct in = ps_fields[f].in == PS_S_OBJECT ? PS_S_CODE : ps_fields[f].in;
        if (ps_fields[f].snap && off != PS_NOFIELD && off + 8 > end[in])
            end[in] = off + 8;
    }
    l->ts_read = end[PS_S_TSTATE];
    l->fr_read = end[PS_S_FRAME];
    l->co_read = end[PS_S_CODE];
}

void ps_layout_str_bits(struct ps_layout *l, int interned_byte)
{
    uint8_t kind = interned_byte ? 8 : 2;
    l->st_kind_shift = kind;
    l->st_compact_bit = (uint8_t)(kind + 3);
    l->st_ascii_bit = (uint8_t)(kind + 4);
}
