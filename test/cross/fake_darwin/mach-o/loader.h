/* fake_darwin/mach-o/loader.h - the Mach-O structures machosyms.c reads
 * (the public file format, written out here for the Linux test). */
#ifndef FAKE_MACHO_LOADER_H
#define FAKE_MACHO_LOADER_H

#include <stdint.h>

struct mach_header_64 {
    uint32_t magic;
    int32_t cputype, cpusubtype;
    uint32_t filetype, ncmds, sizeofcmds, flags, reserved;
};
#define MH_MAGIC_64 0xfeedfacfu
#define MH_DYLIB 0x6

struct load_command {
    uint32_t cmd, cmdsize;
};
#define LC_SYMTAB 0x2
#define LC_SEGMENT_64 0x19
#define LC_FUNCTION_STARTS 0x26

struct segment_command_64 {
    uint32_t cmd, cmdsize;
    char segname[16];
    uint64_t vmaddr, vmsize, fileoff, filesize;
    int32_t maxprot, initprot;
    uint32_t nsects, flags;
};
#define SEG_PAGEZERO "__PAGEZERO"
#define SEG_TEXT "__TEXT"
#define SEG_LINKEDIT "__LINKEDIT"

struct symtab_command {
    uint32_t cmd, cmdsize, symoff, nsyms, stroff, strsize;
};

struct linkedit_data_command {
    uint32_t cmd, cmdsize, dataoff, datasize;
};

#endif
