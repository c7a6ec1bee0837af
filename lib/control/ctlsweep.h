/*
 * ctlsweep.h - stale control sockets of our uid removed from a directory
 * (PYSAMPLE_CONTROL_DIR; macOS's /tmp).
 */
#ifndef PS_CTLSWEEP_H
#define PS_CTLSWEEP_H

#include <stdint.h>

/*
 * Removes the files "pysample.<uid>.*.sock" in dir that are sockets owned
 * by uid and that nobody listens on any more (processes that were killed
 * or _exit()ed before they could), except own (our file name).  Gives up
 * at deadline (monotonic ns).  Returns how many it removed.
 */
int ps_ctlsweep(const char *dir, unsigned uid, const char *own, uint64_t deadline);

#endif
