/*
 * Unit test: the writer's tickets (lib/sampler/writer.c).  A "now" request
 * takes the next ticket; a write covers the tickets asked before it began
 * rendering.  So a request made while a write is in flight (here: from
 * the after-write hook, which runs before that write is done) is not
 * covered by it but by the next one, which holds what happened before the
 * request.  The final write covers everything, once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "profile/output.h"
#include "profile/profile.h"
#include "sampler/writer.h"

static unsigned in_flight_ticket;
static int in_flight_covered = -1;
static int writes;
static char last_path[4096];

/* Adds one stack of function fn to the profile. */
static void add_sample(const char *fn)
{
    struct ps_profile *p = ps_profile_lock();
    uint32_t f = ps_sym_python(&p->syms, fn, "app.py");
    uint32_t th = ps_sym_label(&p->syms, 5, "MainThread");
    uint64_t st[] = { ps_frame(f, 3) };
    CHECK_EQ_INT(ps_stacktab_add(&p->tab, th, st, 1, 1), 0);
    ps_profile_unlock();
}

/* 1 if the file at path mentions s. */
static int file_has(const char *path, const char *s)
{
    char buf[8192];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, s) != NULL;
}

/* The after-write hook of the first write: the file is in place, the
 * write not yet done.  Something happens, then a request is made. */
static void during_first_write(const char *path)
{
    snprintf(last_path, sizeof last_path, "%s", path);
    writes++;
    add_sample("after_first_render");
    in_flight_ticket = ps_writer_ask(PS_WRITE_NOW);
    in_flight_covered = ps_writer_covered(in_flight_ticket);
}

static void count_write(const char *path)
{
    snprintf(last_path, sizeof last_path, "%s", path);
    writes++;
}

int main(void)
{
    char dir[] = "/tmp/pysample-writer-XXXXXX", tmpl[256], why[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(tmpl, sizeof tmpl, "%s/out.txt", dir);
    CHECK_EQ_INT(ps_output_init(tmpl, 0600, why, sizeof why), 0);
    CHECK_EQ_INT(ps_profile_setup(100), 0);
    add_sample("before_first");

    /* Tickets count up; none is covered before a write. */
    unsigned a = ps_writer_ask(PS_WRITE_NOW), b = ps_writer_ask(PS_WRITE_NOW);
    CHECK_EQ_INT(a, 1);
    CHECK_EQ_INT(b, 2);
    CHECK_EQ_INT(ps_writer_covered(a), 0);
    CHECK_EQ_INT(ps_writer_covered(b), 0);

    /* One write serves both, and a ticket asked while it is in flight
     * waits for the next one. */
    ps_writer_after_write(during_first_write);
    CHECK_EQ_INT(ps_writer_serve(), 0);
    CHECK_EQ_INT(writes, 1);
    CHECK_EQ_INT(ps_writer_covered(a), 1);
    CHECK_EQ_INT(ps_writer_covered(b), 1);
    CHECK_EQ_INT(in_flight_ticket, 3);
    CHECK_EQ_INT(in_flight_covered, 0);
    CHECK_EQ_INT(ps_writer_covered(in_flight_ticket), 0);
    CHECK(file_has(last_path, "before_first"));
    CHECK(!file_has(last_path, "after_first_render"));

    /* The next write serves it, with what happened before it was asked. */
    ps_writer_after_write(count_write);
    CHECK_EQ_INT(ps_writer_serve(), 0);
    CHECK_EQ_INT(writes, 2);
    CHECK_EQ_INT(ps_writer_covered(in_flight_ticket), 1);
    CHECK(file_has(last_path, "after_first_render"));
    /* A ticket not yet asked for is not covered. */
    CHECK_EQ_INT(ps_writer_covered(in_flight_ticket + 1), 0);

    /* The final write: asked (no ticket), served once, covers everything;
     * after it nothing is written again. */
    CHECK_EQ_INT(ps_writer_state(), PS_WRITE_OPEN);
    unsigned late = ps_writer_ask(PS_WRITE_NOW);
    CHECK_EQ_INT(ps_writer_ask(PS_WRITE_FINAL), 0);
    CHECK_EQ_INT(ps_writer_serve(), 1);
    CHECK_EQ_INT(writes, 3);
    CHECK_EQ_INT(ps_writer_state(), PS_WRITE_FINAL_DONE);
    CHECK_EQ_INT(ps_writer_covered(late), 1);
    CHECK_EQ_INT(ps_writer_covered(late + 100), 1);
    CHECK_EQ_INT(ps_writer_write_final(), 0);
    CHECK_EQ_INT(ps_writer_serve(), 1);
    CHECK_EQ_INT(writes, 3);

    unlink(last_path);
    rmdir(dir);
    CHECK_DONE();
}
