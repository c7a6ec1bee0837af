/*
 * fake_darwin/libproc.h - just enough of libproc (and <sys/proc_info.h>,
 * which the real one includes) for test_darwin_process.c to compile
 * lib/platform/darwin/process.c on Linux.  The test defines proc_pidinfo.
 * struct proc_bsdinfo as the public ABI lays it out (136 bytes, the
 * start time last); process.c reads only the start.
 */
#ifndef FAKE_LIBPROC_H
#define FAKE_LIBPROC_H

#include <stdint.h>

#define PROC_PIDTBSDINFO 3
#define MAXCOMLEN 16

struct proc_bsdinfo {
    uint32_t pbi_flags, pbi_status, pbi_xstatus, pbi_pid, pbi_ppid;
    uint32_t pbi_uid, pbi_gid, pbi_ruid, pbi_rgid, pbi_svuid, pbi_svgid;
    uint32_t rfu_1;
    char pbi_comm[MAXCOMLEN];
    char pbi_name[2 * MAXCOMLEN];
    uint32_t pbi_nfiles, pbi_pgid, pbi_pjobc, e_tdev, e_tpgid;
    int32_t pbi_nice;
    uint64_t pbi_start_tvsec;
    uint64_t pbi_start_tvusec;
};

int proc_pidinfo(int pid, int flavor, uint64_t arg, void *buffer, int buffersize);

/* Not libproc's: macOS's <unistd.h> declares it, glibc's does not, and
 * process.c calls it (the test defines it). */
int issetugid(void);

#endif
