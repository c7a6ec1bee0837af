/*
 * escape.c - the output format's escaping (escape.h).  Pure: no state,
 * no allocation, safe wherever the render runs.
 */
#include "profile/escape.h"

static int needs_escape(unsigned char c)
{
    return c == '%' || c == ';' || c < 0x20 || c == 0x7f;
}

size_t ps_escape(const char *s, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (needs_escape(c)) {
            if (o + 3 >= outlen)
                break;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            if (o + 1 >= outlen)
                break;
            out[o++] = (char)c;
        }
    }
    if (outlen)
        out[o] = '\0';
    return o;
}

size_t ps_escaped_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += needs_escape((unsigned char)*s) ? 3 : 1;
    return n;
}
