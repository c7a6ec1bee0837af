/* fake_darwin/mach-o/dyld.h - dyld's image list, played by test_darwin_copy.c. */
#ifndef FAKE_MACHO_DYLD_H
#define FAKE_MACHO_DYLD_H

#include <stdint.h>

struct mach_header;
uint32_t _dyld_image_count(void);
const struct mach_header *_dyld_get_image_header(uint32_t image_index);
intptr_t _dyld_get_image_vmaddr_slide(uint32_t image_index);
const char *_dyld_get_image_name(uint32_t image_index);
void _dyld_register_func_for_add_image(void (*func)(const struct mach_header *mh,
                                                    intptr_t vmaddr_slide));
void _dyld_register_func_for_remove_image(void (*func)(const struct mach_header *mh,
                                                       intptr_t vmaddr_slide));

#endif
