/*
 * layout_debugoffsets_table.h - what the tables of _Py_DebugOffsets
 * (layout_debugoffsets_table.c: where each value lies in each minor
 * version's block, and the values the C types fix) give the one pass that
 * reads and checks a block (layout_debugoffsets.c).  Internal to the two:
 * layout.h is their public face (ps_layout_from_debug_offsets).
 */
#ifndef PS_LAYOUT_DEBUGOFFSETS_TABLE_H
#define PS_LAYOUT_DEBUGOFFSETS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

/* Block layouts (columns of the tables below): 3.13's, 3.14's, 3.15's. */
#define NVERSIONS 3
/* Versions read (rows of ps_do_versions[]): 3.13, 3.14, 3.15, 3.16. */
#define NKNOWN 4

enum {
    DO_RT_SIZE = PS_F_COUNT, DO_IS_SIZE, DO_TS_SIZE, DO_FR_SIZE, DO_CO_SIZE, DO_OB_SIZE,
    DO_BY_SIZE, DO_UN_SIZE, DO_UN_ASCII_SIZE, DO_UN_COMPACT_SIZE,
    DO_FR_LOCALSPLUS, DO_TP_NAME, DO_TP_FLAGS, DO_DICT_SIZE, DO_DICT_MA_KEYS,
    DO_DICT_MA_VALUES,
    DO_FR_STACKPOINTER, DO_GEN_SIZE, DO_GEN_NAME, DO_GEN_IFRAME, DO_GEN_FRAME_STATE,
    DO_GIL_STATE, DO_GIL_LOCKED, DO_GIL_HOLDER,
    DO_TS_STATUS, DO_GC_SIZE, DO_GC_COLLECTING,
    DO_COUNT
};

/* Position of each value, per version (0: this version's block has none). */
extern const uint16_t ps_do_positions[DO_COUNT][NVERSIONS];

/* Members whose value the C types fix. */
struct ps_do_expect {
    const char *what;
    uint64_t gil, ft;                 /* value in GIL and free-threaded builds */
    uint16_t pos[NVERSIONS];          /* 3.13, 3.14, 3.15 */
};
extern const struct ps_do_expect ps_do_expect[];
extern const size_t ps_do_expect_count;

/* The versions read, one row each, the one table that says which are
 * accepted: its earliest release with the block layout it is read with,
 * that layout (a column of the tables here), the minor version whose
 * constants and other tables (frames, asyncio) it is read as, and the
 * block's size (sizeof(_Py_DebugOffsets)).  A minor version not listed
 * is refused. */
struct ps_do_version {
    int minor;
    uint32_t min_hexversion;
    const char *min_name;      /* ... as the user knows it */
    int column;                /* its block's layout: 0 3.13's, 1 3.14's, 2 3.15's */
    int reads_as;              /* minor version of the layout tables used */
    uint32_t total;
};
extern const struct ps_do_version ps_do_versions[NKNOWN];

/* Where each struct's size is, and what size is plausible. */
struct ps_do_struct {
    int size_row;              /* DO_*_SIZE; 0: no such struct in the block */
    const char *name;
    uint64_t lo, hi;
};
extern const struct ps_do_struct ps_do_structs[PS_S_COUNT];

/* Thread names for 3.13: the constants the block does not give, per build
 * flavour, and the tp_name and tp_flags they hold for. */
struct ps_do_names_map {
    int minor, free_threaded;
    uint32_t tp_name, tp_flags;                           /* expected values */
    uint32_t tp_basicsize, tp_base, tp_dictoffset, ht_cached_keys;
    int32_t inst_dict;                                    /* MANAGED_DICT_OFFSET */
};
extern const struct ps_do_names_map ps_do_names_maps[];
extern const size_t ps_do_names_maps_count;

/* Where tstate->state lies after _status, per version (the [gc] frame). */
extern const uint32_t ps_do_ts_state_after_status[NVERSIONS];

#endif
