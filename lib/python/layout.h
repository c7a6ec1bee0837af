/*
 * layout.h - where things are inside one CPython build.
 *
 * Every version difference the sampler cares about is data in struct
 * ps_layout: byte offsets of the fields it reads and a few small enums for
 * the handful of places where the *meaning* changed (how a frame records its
 * position, which line table format a code object carries).  The frame
 * walker, string reader and code cache are written once against this struct.
 *
 *   3.9-3.12  built-in tables      lib/python/layout_legacy.c
 *   3.13+     the interpreter's own _Py_DebugOffsets
 *                                  lib/python/layout_debugoffsets.c
 *   what each offset is, for both  lib/python/layout_fields.c (ps_fields)
 */
#ifndef PS_LAYOUT_H
#define PS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "python/linetable.h"

/* Offset value for "this build has no such field". */
#define PS_NOFIELD 0xffffffffu

enum ps_frame_kind {
    PS_FRAMES_OBJECT = 1, /* 3.9/3.10: heap PyFrameObject chain via f_back */
    PS_FRAMES_INTERP,     /* 3.11+: _PyInterpreterFrame chain via previous */
};

enum ps_pos_kind {
    PS_POS_LASTI_BYTES = 1, /* 3.9: int f_lasti, byte offset */
    PS_POS_LASTI_UNITS,     /* 3.10: int f_lasti, code units (line table wants bytes) */
    PS_POS_INSTR_PTR,       /* 3.11+: pointer into the code's bytecode */
};

/* Where an instance of a Python class keeps its attributes (threadnames.c). */
enum ps_inst_kind {
    PS_INST_NONE = 0,       /* not described: thread names are not read */
    PS_INST_DICTOFFSET,     /* 3.9/3.10: dict pointer at type->tp_dictoffset */
    PS_INST_VALUES_OR_DICT, /* 3.11: values pointer and dict pointer before the object */
    PS_INST_TAGGED,         /* 3.12: one pointer before the object, low bit 1 = values */
    PS_INST_INLINE,         /* 3.13: values right after the object, dict pointer before */
};

/* Layout of a dict's keys object (PyDictKeysObject). */
enum ps_dk_kind {
    PS_DK_SIZE = 1,         /* 3.9/3.10: Py_ssize_t dk_size, 24-byte entries */
    PS_DK_LOG2,             /* 3.11+: log2 sizes and dk_kind (16 or 24-byte entries) */
};

struct ps_layout {
    uint32_t hexversion;    /* PY_VERSION_HEX; micro 0 when only major.minor is known */
    int minor;              /* 9 .. 15: the layouts read by (3.16.0a0 reads as 15) */
    int free_threaded;
    int from_debug_offsets; /* 1 if the offsets below came from _Py_DebugOffsets */

    /* _PyRuntimeState */
    uint32_t rt_finalizing;      /* pointer, non-NULL once finalizing */
    uint32_t rt_interp_head;
    uint32_t rt_gil;             /* struct _gil_runtime_state, 3.9-3.11 (one per process) */

    /* PyInterpreterState */
    uint32_t is_next;
    uint32_t is_threads_head;
    uint32_t is_id;              /* int64 interpreter id, 0 = main (tick.c: other
                                    interpreters' root frames) */
    uint32_t is_modules;         /* the modules dict (sys.modules), for asyncio (tasks_search.c) */
    uint32_t is_ceval_gil;       /* pointer to the GIL in use, 3.12+ (interp->ceval.gil) */
    /* Inside struct _gil_runtime_state (PYSAMPLE_GIL, tick.c): the thread
     * state that took the GIL last, and whether it is held now; the same
     * in every version (8 and 16), 3.13+ say so in their block.
     * PS_NOFIELD: the GIL holder cannot be found. */
    uint32_t gil_last_holder;
    uint32_t gil_locked;         /* int */
    /* Garbage collection (the [gc] frame, interpstate.c): the gc state
     * inside PyInterpreterState is is_gc (a ps_field); 'collecting' (int)
     * is at gc_collecting inside it, PS_NOFIELD where not known. */
    uint32_t is_gc;
    uint32_t gc_collecting;

    /* PyThreadState */
    uint32_t ts_read;            /* bytes to snapshot: covers every ts_ field */
    uint32_t ts_next;
    uint32_t ts_interp;
    uint32_t ts_thread_id;       /* pthread_t of the thread */
    uint32_t ts_native_id;       /* kernel tid, 3.11+ */
    uint32_t ts_frame;           /* 3.9/3.10 frame, 3.13+ current_frame */
    uint32_t ts_cframe;          /* 3.11/3.12: _PyCFrame pointer ... */
    uint32_t cf_current_frame;   /* ... and current_frame inside it */
    uint32_t ts_state;           /* int attached/detached/suspended, 3.13+ (interpstate.h);
                                  * read only for free-threaded builds */

    /* frames */
    enum ps_frame_kind frame_kind;
    enum ps_pos_kind pos_kind;
    uint32_t fr_read;            /* bytes to snapshot per frame */
    uint32_t fr_back;
    uint32_t fr_code;
    uint32_t fr_pos;             /* f_lasti (int) or prev_instr/instr_ptr */
    uint32_t fr_owner;           /* signed char; PS_NOFIELD before 3.11 */
    uint32_t fr_is_entry;        /* bool, 3.11 only: first frame of its eval call */
    uint32_t fr_tlbc_index;      /* int32, 3.14t thread-local bytecode */
    int owner_first_native;      /* owner >= this is not a Python frame */
    uintptr_t code_tag_mask;     /* low bits tagging f_executable (3.14+) */
    uint32_t fr_specials;        /* 3.11+: bytes before localsplus (FRAME_SPECIALS_SIZE
                                  * words): a frame's fixed part on the data stack */

    /* objects */
    uint32_t ob_type;

    /* PyCodeObject */
    uint32_t co_read;            /* bytes to snapshot: covers every co_ field */
    uint32_t co_filename;
    uint32_t co_name;
    uint32_t co_qualname;        /* PS_NOFIELD before 3.11 */
    uint32_t co_linetable;
    uint32_t co_firstlineno;     /* int */
    uint32_t co_nunits;          /* ob_size: code units of bytecode, 3.11+ */
    uint32_t co_code_adaptive;   /* inline bytecode, 3.11+ */
    uint32_t co_tlbc;            /* _PyCodeArray*, 3.14t */
    uint32_t co_stacksize;       /* int; with co_nlocalsplus the size of the */
    uint32_t co_nlocalsplus;     /* ... code's frames on the data stack (3.11+) */
    enum ps_lt_format lt_format;

    /* bytes */
    uint32_t bytes_size;
    uint32_t bytes_sval;

    /* str */
    uint32_t str_length;
    uint32_t str_state;
    uint32_t str_ascii_data;     /* sizeof(PyASCIIObject) */
    uint32_t str_compact_data;   /* sizeof(PyCompactUnicodeObject) */
    uint8_t st_kind_shift;       /* state bit positions */
    uint8_t st_compact_bit;
    uint8_t st_ascii_bit;
    uint8_t st_ready_bit;        /* 0xff when strings are always ready (3.12+) */

    /* Thread names (threadnames.c): Thread._bootstrap_inner's first local
     * is the Thread object; its _name is an instance attribute.  Only
     * inst_kind != PS_INST_NONE makes the fields below meaningful. */
    enum ps_inst_kind inst_kind;
    enum ps_dk_kind dk_kind;
    /* PyDictKeysObject (Objects/dict-common.h, not installed, so not in
     * _Py_DebugOffsets either): where its header fields and entries are.
     * ps_dict_keys_layout() fills them for dk_kind. */
    uint32_t dk_size_at;             /* PS_DK_SIZE: Py_ssize_t dk_size */
    uint32_t dk_log2_size_at;        /* PS_DK_LOG2: uint8 log2 of the size */
    uint32_t dk_log2_index_bytes_at; /* PS_DK_LOG2: uint8 log2 of the index bytes */
    uint32_t dk_kind_at;             /* PS_DK_LOG2: uint8 0 general, 1 unicode, 2 split */
    uint32_t dk_nentries_at;         /* Py_ssize_t entries in use */
    uint32_t dk_indices_at;          /* the index table; entries follow it */
    uint32_t fr_localsplus;      /* first local of a frame (f_localsplus / localsplus) */
    uint32_t tp_name;            /* PyTypeObject: const char* */
    uint32_t tp_basicsize;       /* Py_ssize_t */
    uint32_t tp_flags;           /* unsigned long */
    uint32_t tp_base;
    uint32_t tp_dictoffset;      /* Py_ssize_t */
    uint32_t ht_cached_keys;     /* PyHeapTypeObject: shared keys of split dicts */
    int32_t inst_dict;           /* 3.11+: dict (3.12: dict or tagged values) pointer,
                                  * relative to the object (negative: pre-header) */
    int32_t inst_values;         /* 3.11: values pointer, relative to the object */
    uint32_t dict_keys;          /* PyDictObject ma_keys */
    uint32_t dict_values;        /* PyDictObject ma_values */
    uint32_t values_items;       /* PyDictValues: offset of values[] (3.13: 8) */
    uint32_t values_valid;       /* PyDictValues: uint8 valid flag, 3.13 */

    /* 3.14+, from the block, for the asyncio task walk (tasks_read.c);
     * PS_NOFIELD before.  objects_described: the type and dict fields
     * above are set even though thread names are not (inst_kind NONE). */
    uint32_t fr_stackpointer;    /* _PyStackRef* top of the value stack */
    uint32_t gen_name, gen_iframe, gen_frame_state;
    int objects_described;
};

/* ---- the offsets both layout sources fill (layout_fields.c) --------------- */

/*
 * Every byte offset of struct ps_layout that is read out of an interpreter
 * struct, by id: layout_legacy.c and layout_debugoffsets.c describe each
 * version as a table indexed by these ids (one row per field, one column
 * per version), and ps_fields[] says once, for both, where the value goes,
 * which struct it lies in, how wide it is and whether the sampler copies it
 * with its struct's snapshot (ts_read, fr_read, co_read).
 */
enum ps_field {
    PS_F_RT_FINALIZING, PS_F_RT_INTERP_HEAD, PS_F_RT_GIL,
    PS_F_IS_NEXT, PS_F_IS_THREADS_HEAD, PS_F_IS_ID, PS_F_IS_MODULES, PS_F_IS_CEVAL_GIL,
    PS_F_IS_GC,
    PS_F_TS_NEXT, PS_F_TS_INTERP, PS_F_TS_FRAME, PS_F_TS_THREAD_ID, PS_F_TS_NATIVE_ID,
    PS_F_TS_CFRAME, PS_F_CF_CURRENT_FRAME,
    PS_F_FR_BACK, PS_F_FR_CODE, PS_F_FR_POS, PS_F_FR_OWNER, PS_F_FR_TLBC_INDEX, PS_F_FR_IS_ENTRY,
    PS_F_OB_TYPE,
    PS_F_CO_FILENAME, PS_F_CO_NAME, PS_F_CO_QUALNAME, PS_F_CO_LINETABLE, PS_F_CO_FIRSTLINENO,
    PS_F_CO_NUNITS, PS_F_CO_CODE_ADAPTIVE, PS_F_CO_TLBC, PS_F_CO_STACKSIZE, PS_F_CO_NLOCALSPLUS,
    PS_F_BYTES_SIZE, PS_F_BYTES_SVAL,
    PS_F_STR_LENGTH, PS_F_STR_STATE,
    PS_F_COUNT
};

/* The interpreter structs the fields lie in. */
enum ps_struct {
    PS_S_RUNTIME, PS_S_INTERP, PS_S_TSTATE, PS_S_CFRAME, PS_S_FRAME, PS_S_CODE, PS_S_OBJECT,
    PS_S_BYTES, PS_S_STR, PS_S_COUNT
};

struct ps_field_desc {
    const char *name;      /* for messages: "tstate.current_frame" */
    size_t at;             /* offsetof(struct ps_layout, ...) */
    enum ps_struct in;
    uint8_t width;         /* bytes read there */
    uint8_t snap;          /* 1 if in its snapshot: ts_read, fr_read or co_read */
};

extern const struct ps_field_desc ps_fields[PS_F_COUNT];

/* Sets field f of l to off (PS_NOFIELD: absent). */
static inline void ps_layout_set(struct ps_layout *l, enum ps_field f, uint32_t off)
{
    memcpy((char *)l + ps_fields[f].at, &off, sizeof off);
}

static inline uint32_t ps_layout_get(const struct ps_layout *l, enum ps_field f)
{
    uint32_t off;
    memcpy(&off, (const char *)l + ps_fields[f].at, sizeof off);
    return off;
}

/* Sets ts_read, fr_read and co_read to cover every snapshot field present
 * (8 bytes from each, as the readers copy pointers). */
void ps_layout_spans(struct ps_layout *l);

/* Sets the bit positions of a str's state bit-field: interned (2 bits, or
 * a whole byte when interned_byte: free-threaded 3.14+), then kind (3
 * bits), compact, ascii. */
void ps_layout_str_bits(struct ps_layout *l, int interned_byte);

/* Result of trying to describe the running interpreter. */
enum ps_layout_status {
    PS_LAYOUT_OK = 0,
    PS_LAYOUT_UNSUPPORTED,   /* a version we know we cannot read */
    PS_LAYOUT_INVALID,       /* the data we found does not make sense */
};

/*
 * Fills *l for a 3.9-3.12 interpreter (minor 9..12).  why receives a
 * message for the user when the build cannot be read (trace-refs builds).
 */
enum ps_layout_status ps_layout_legacy(int minor, uint32_t hexversion,
                                       struct ps_layout *l,
                                       char *why, size_t whylen);

/*
 * Fills *l from a copy of the _Py_DebugOffsets block (3.13+), which starts
 * at _PyRuntime.  do_len is how many bytes of it the caller copied.
 */
enum ps_layout_status ps_layout_from_debug_offsets(const uint8_t *dbg,
                                                   size_t do_len,
                                                   uint32_t hexversion,
                                                   struct ps_layout *l,
                                                   char *why, size_t whylen);

/* Sets the dict keys object's fields of l for its dk_kind:
 * 3.9/3.10 dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, indices;
 * 3.11+ dk_refcnt, log2 size, log2 index bytes, kind, version, usable,
 * nentries, indices. */
static inline void ps_dict_keys_layout(struct ps_layout *l)
{
    if (l->dk_kind == PS_DK_SIZE) {
        l->dk_size_at = 8;
        l->dk_nentries_at = 32;
        l->dk_indices_at = 40;
    } else {
        l->dk_log2_size_at = 8;
        l->dk_log2_index_bytes_at = 9;
        l->dk_kind_at = 10;
        l->dk_nentries_at = 24;
        l->dk_indices_at = 32;
    }
}

/* Size of an object's header (PyObject): 16, 32 in free-threaded builds;
 * the first field of any object struct starts here. */
static inline uint32_t ps_ob_head(const struct ps_layout *L)
{
    return L->ob_type + 8;
}

/* The pointer stored at offset off of a snapshot (bytes copied from the
 * interpreter), or 0 for a field this version does not have. */
static inline uintptr_t ps_ptr_at(const uint8_t *snap, uint32_t off)
{
    uintptr_t v = 0;
    if (off != PS_NOFIELD)
        memcpy(&v, snap + off, sizeof v);
    return v;
}

#endif
