/*
 * tickpath.h - PS_TICK_PATH marks a function that every sampler tick
 * runs (issue #36 item 3).
 *
 * A tick starts on an instruction cache and TLB that its sleep left cold,
 * and its ~7 000 instructions ran from ~210 lines of code on 27 pages
 * spread over the library's text (valgrind, 3.13.0, 10 frames).  The
 * marked functions share one section, .text.hot.pysample_tick, which GNU
 * ld and lld place side by side (with the other .text.hot input sections),
 * so that the tick's code takes 5-6 pages (18 KiB).  Only where the functions go
 * changes: not how they are compiled (GCC's hot attribute would also
 * optimise them differently), not what they do.  Mach-O has no such
 * section names: there the mark is nothing.
 */
#ifndef PS_TICKPATH_H
#define PS_TICKPATH_H

#if defined(__ELF__)
#define PS_TICK_PATH __attribute__((section(".text.hot.pysample_tick")))
#else
#define PS_TICK_PATH
#endif

/*
 * PS_TICK_DATA marks a file-level object that every tick reads or
 * writes (the settings the tick reads, the read path's state, the
 * profile's lock and tables, the sampler's context, the counters).  Each
 * stays its file's, as docs/design.md counts them; only where it lies
 * changes.  Spread over .data and .bss they took 11 pages a tick (31
 * lines); in one section of their own they share a few.  The name has no
 * leading dot, so that no rule of the linker's script takes it
 * (.data.* would, in each file's place): GNU ld and lld gather such an
 * orphan section's pieces from every file, in link order (lib/meson.build),
 * after .data.  So settings.c's copy for the ticks comes first, its
 * numbers last (config.h), next to memread.c's and faultview.c's state,
 * the profile's lock and the sampler's context, whose hot fields come
 * first (context.h): one page; the counters follow the context.
 * Zero-initialised objects so marked take room in the file (PROGBITS):
 * keep the mark to what a tick touches.  Nothing on Mach-O.
 */
#if defined(__ELF__)
#define PS_TICK_DATA __attribute__((section("pysample_tick_data")))
#else
#define PS_TICK_DATA
#endif

#endif
