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

#endif
