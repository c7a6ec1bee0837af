/* Unit test: the sampler's state machine (state.h) and the fork pause's
 * (forkpause.h) -- every move the tables allow is made, every other one
 * from every state is refused and leaves the state as it was, a move from
 * a stale state is refused, and docs/design.md draws and lists exactly
 * the tables' moves. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sampler/forkpause.h"
#include "sampler/sampler.h"
#include "sampler/state.h"
#include "util/statem.h"

#define NS PS_SAMPLER_STATES

/* Puts the sampler's state at `to` from OFF along allowed moves (breadth
 * first), each one made with ps_sampler_move: 0, or -1 if unreachable. */
static int reach(int to)
{
    int prev[NS], queue[NS], head = 0, tail = 0;
    for (int i = 0; i < NS; i++)
        prev[i] = -2;
    prev[PS_SAMPLER_OFF] = -1;
    queue[tail++] = PS_SAMPLER_OFF;
    while (head < tail) {
        int s = queue[head++];
        for (size_t m = 0; m < ps_sampler_nmoves; m++) {
            if (ps_sampler_moves[m].from == s && prev[ps_sampler_moves[m].to] == -2) {
                prev[ps_sampler_moves[m].to] = s;
                queue[tail++] = ps_sampler_moves[m].to;
            }
        }
    }
    if (prev[to] == -2)
        return -1;
    int path[NS], n = 0;
    for (int s = to; s != -1; s = prev[s])
        path[n++] = s;
    ps_sampler_state_child_after_fork(0);  /* OFF: the one store that is not a move */
    for (int i = n - 1; i > 0; i--) {
        if (ps_sampler_move(path[i], path[i - 1]) != 0)
            return -1;
    }
    return (int)ps_sampler_state() == to ? 0 : -1;
}

/* Every (from, to): allowed moves happen, others are refused, state kept. */
static void every_move(void)
{
    int legal = 0, illegal = 0;
    for (int from = 0; from < NS; from++) {
        for (int to = 0; to < NS; to++) {
            CHECK_EQ_INT(reach(from), 0);
            int allowed = ps_move_allowed(ps_sampler_moves, ps_sampler_nmoves, from, to);
            int rc = ps_sampler_move(from, to);
            if (rc != (allowed ? 0 : -1) || (int)ps_sampler_state() != (allowed ? to : from))
                fprintf(stderr, "move %s -> %s: rc %d, now %s\n", ps_sampler_state_name(from),
                        ps_sampler_state_name(to), rc, ps_sampler_state_name(ps_sampler_state()));
            CHECK_EQ_INT(rc, allowed ? 0 : -1);
            CHECK_EQ_INT(ps_sampler_state(), allowed ? to : from);
            allowed ? legal++ : illegal++;
            /* A move allowed from elsewhere, made on a stale reading. */
            for (int other = 0; other < NS; other++) {
                if (other == from || !ps_move_allowed(ps_sampler_moves, ps_sampler_nmoves, other, to))
                    continue;
                CHECK_EQ_INT(reach(from), 0);
                CHECK_EQ_INT(ps_sampler_move(other, to), -1);
                CHECK_EQ_INT(ps_sampler_state(), from);
            }
        }
    }
    CHECK_EQ_INT(legal, (int)ps_sampler_nmoves);
    CHECK_EQ_INT(legal + illegal, NS * NS);
}

/* What the other modules ask of a state agrees with what it means. */
static void state_meanings(void)
{
    for (int s = 0; s < NS; s++) {
        CHECK_EQ_INT(reach(s), 0);
        int exists = s != PS_SAMPLER_OFF && s != PS_SAMPLER_PAUSED;
        CHECK_EQ_INT(ps_sampler_alive(), exists);
        CHECK_EQ_INT(ps_sampler_may_read(), s == PS_SAMPLER_WAITING || s == PS_SAMPLER_SAMPLING ||
                                                s == PS_SAMPLER_IDLE);
        CHECK_EQ_INT(ps_sampler_finished(), s == PS_SAMPLER_FINISHED);
    }
    /* The fork pause: nothing to pause without a thread that reads; a
     * stop while out leaves it out, and the resume then starts nothing
     * (it used to start the thread again); a closed profile: OFF. */
    CHECK_EQ_INT(reach(PS_SAMPLER_OFF), 0);
    CHECK_EQ_INT(ps_sampler_pause(), 0);
    CHECK_EQ_INT(ps_sampler_state(), PS_SAMPLER_OFF);
    CHECK_EQ_INT(reach(PS_SAMPLER_PAUSED), 0);
    ps_sampler_stop();
    CHECK_EQ_INT(ps_sampler_state(), PS_SAMPLER_OFF);
    ps_sampler_resume(1);
    CHECK_EQ_INT(ps_sampler_state(), PS_SAMPLER_OFF);
    CHECK_EQ_INT(reach(PS_SAMPLER_PAUSED), 0);
    ps_sampler_resume(0);
    CHECK_EQ_INT(ps_sampler_state(), PS_SAMPLER_OFF);
    /* A fork child is OFF whatever the parent's state. */
    CHECK_EQ_INT(reach(PS_SAMPLER_SAMPLING), 0);
    ps_sampler_state_child_after_fork(0);
    CHECK_EQ_INT(ps_sampler_state(), PS_SAMPLER_OFF);
}

/* The fork pause's table, every move on a state of the test's own. */
static void forkpause_moves(void)
{
    int legal = 0;
    for (int from = 0; from < PS_FORKPAUSE_PHASES; from++) {
        for (int to = 0; to < PS_FORKPAUSE_PHASES; to++) {
            _Atomic int phase = from;
            int allowed = ps_move_allowed(ps_forkpause_moves, ps_forkpause_nmoves, from, to);
            CHECK_EQ_INT(ps_move(&phase, ps_forkpause_moves, ps_forkpause_nmoves, from, to),
                         allowed ? 0 : -1);
            CHECK_EQ_INT(atomic_load(&phase), allowed ? to : from);
            legal += allowed;
        }
    }
    CHECK_EQ_INT(legal, (int)ps_forkpause_nmoves);
    CHECK_EQ_INT(ps_forkpause_phase(), PS_FORKPAUSE_CLOSED);
}

/* ---- docs/design.md ---------------------------------------------------------- */

typedef const char *(*name_fn)(int);
static const char *sampler_name(int s) { return ps_sampler_state_name((enum ps_sampler_state)s); }
static const char *phase_name(int p) { return ps_forkpause_phase_name((enum ps_forkpause_phase)p); }

static int lookup(name_fn name, int n, const char *word)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(name(i), word) == 0)
            return i;
    }
    return -1;
}

/* 1 if word occurs in text as a whole word. */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p != NULL; p = strstr(p + 1, word)) {
        int before = p == text || !(p[-1] >= 'A' && p[-1] <= 'Z');
        int after = !(p[n] >= 'A' && p[n] <= 'Z');
        if (before && after)
            return 1;
    }
    return 0;
}

/*
 * The fenced block after "<!-- moves: tag -->" in design.md: a drawing in
 * which every state appears, then "moves:" and one "FROM -> TO  why" line
 * per move, which must be the table's moves, each once, and no other.
 */
static void doc_matches(const char *doc, const char *tag, name_fn name, int n,
                        const struct ps_move *table, size_t nmoves)
{
    char marker[64], drawing[4096] = "";
    snprintf(marker, sizeof marker, "<!-- moves: %s -->", tag);
    const char *p = strstr(doc, marker);
    CHECK(p != NULL);
    if (p == NULL || (p = strstr(p, "```\n")) == NULL)
        return;
    const char *end = strstr(p + 4, "```"), *list = strstr(p, "\nmoves:\n");
    CHECK(end != NULL && list != NULL && list < end);
    if (end == NULL || list == NULL || list > end)
        return;
    snprintf(drawing, sizeof drawing, "%.*s", (int)(list - p), p);
    for (int i = 0; i < n; i++) {
        if (!has_word(drawing, name(i)))
            fprintf(stderr, "design.md (%s): %s is not drawn\n", tag, name(i));
        CHECK(has_word(drawing, name(i)));
    }
    int seen[64] = { 0 }, listed = 0;
    for (const char *line = list + 8; line < end; line = strchr(line, '\n') + 1) {
        char a[32], b[32];
        if (sscanf(line, " %31[A-Z] -> %31[A-Z]", a, b) != 2)
            continue;
        int from = lookup(name, n, a), to = lookup(name, n, b), found = 0;
        for (size_t m = 0; m < nmoves; m++) {
            if (table[m].from == from && table[m].to == to) {
                found = 1;
                seen[m]++;
            }
        }
        if (!found)
            fprintf(stderr, "design.md (%s): %s -> %s is not in the table\n", tag, a, b);
        CHECK(found);
        listed++;
    }
    for (size_t m = 0; m < nmoves; m++) {
        if (seen[m] != 1)
            fprintf(stderr, "design.md (%s): %s -> %s listed %d times\n", tag,
                    name(table[m].from), name(table[m].to), seen[m]);
        CHECK_EQ_INT(seen[m], 1);
    }
    CHECK_EQ_INT(listed, (int)nmoves);
}

static void design_doc(void)
{
    static char doc[1 << 18];
    FILE *f = fopen("../docs/design.md", "r");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    doc_matches(doc, "sampler", sampler_name, NS, ps_sampler_moves, ps_sampler_nmoves);
    doc_matches(doc, "forkpause", phase_name, PS_FORKPAUSE_PHASES, ps_forkpause_moves,
                ps_forkpause_nmoves);
}

int main(void)
{
    every_move();
    state_meanings();
    forkpause_moves();
    design_doc();
    CHECK_DONE();
}
