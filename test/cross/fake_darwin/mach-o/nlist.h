/* fake_darwin/mach-o/nlist.h - the 64-bit symbol table entry (public format). */
#ifndef FAKE_MACHO_NLIST_H
#define FAKE_MACHO_NLIST_H

#include <stdint.h>

struct nlist_64 {
    union {
        uint32_t n_strx;
    } n_un;
    uint8_t n_type, n_sect;
    uint16_t n_desc;
    uint64_t n_value;
};
#define N_STAB 0xe0
#define N_TYPE 0x0e
#define N_UNDF 0x0
#define N_SECT 0xe
#define N_EXT 0x01
#define NO_SECT 0

#endif
