/*
 * check.h - the few macros the unit tests need.  Each failed CHECK prints
 * file:line and the expression; main() returns the number of failures so
 * meson reports the test by name.
 */
#ifndef PS_CHECK_H
#define PS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        check_failures++; \
    } } while (0)

#define CHECK_EQ_INT(a, b) do { \
    long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ != b_) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", \
                __FILE__, __LINE__, #a, #b, a_, b_); \
        check_failures++; \
    } } while (0)

#define CHECK_EQ_STR(a, b) do { \
    const char *a_ = (a), *b_ = (b); \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", \
                __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
        check_failures++; \
    } } while (0)

#define CHECK_DONE() do { \
    if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures); \
    return check_failures ? 1 : 0; } while (0)

#endif
