/*
 * pystr.c - str and bytes objects, read from raw memory.
 *
 * PEP 393 strings come in shapes that differ in where the characters are:
 *   compact ASCII       right after PyASCIIObject, already UTF-8;
 *   compact non-ASCII   after PyCompactUnicodeObject, as 1, 2 or 4-byte code
 *                       points; there may also be a cached UTF-8 copy;
 *   legacy (<= 3.11)    in a separate buffer; never used for code object
 *                       names, so we refuse it rather than chase pointers.
 * The state bit positions and header sizes come from the layout.
 */
#include <stdlib.h>
#include <string.h>

#include "memory/memread.h"
#include "python/pystr.h"

static int put_utf8(uint32_t cp, char *out, size_t outlen, size_t *o)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp; n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6)); b[1] = (char)(0x80 | (cp & 0x3F)); n = 2;
    } else if (cp < 0x10000) {
        /* Lone surrogates can occur in Python strings; write them as
         * U+FFFD so the output stays valid UTF-8. */
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xFFFD;
        b[0] = (char)(0xE0 | (cp >> 12)); b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else if (cp <= 0x10FFFF) {
        b[0] = (char)(0xF0 | (cp >> 18)); b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    } else {
        return -1;
    }
    if (*o + n >= outlen)
        return -1;
    memcpy(out + *o, b, n);
    *o += n;
    return 0;
}

int ps_str_to_utf8(const uint8_t *data, size_t n, int kind, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        if (kind == 1) {
            cp = data[i];
        } else if (kind == 2) {
            uint16_t v;
            memcpy(&v, data + 2 * i, 2);
            cp = v;
        } else if (kind == 4) {
            memcpy(&cp, data + 4 * i, 4);
        } else {
            return -1;
        }
        if (put_utf8(cp, out, outlen, &o) != 0)
            return -1;
    }
    if (o >= outlen)
        return -1;
    out[o] = '\0';
    return (int)o;
}

int ps_str_read(const struct ps_layout *l, uintptr_t addr, char *out, size_t outlen)
{
    /* One read covers the header of every shape. */
    uint8_t hdr[192];
    size_t hdr_len = l->str_compact_data;
    if (hdr_len > sizeof hdr || outlen == 0 || ps_read(hdr, addr, hdr_len) != 0)
        return -1;

    int64_t length;
    uint32_t state;
    memcpy(&length, hdr + l->str_length, sizeof length);
    memcpy(&state, hdr + l->str_state, sizeof state);
    if (length < 0 || length > PS_STR_MAX)
        return -1;

    int kind = (int)((state >> l->st_kind_shift) & 7);
    int compact = (state >> l->st_compact_bit) & 1;
    int ascii = (state >> l->st_ascii_bit) & 1;
    if (l->st_ready_bit != 0xff && !((state >> l->st_ready_bit) & 1))
        return -1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
        return -1;

    if (ascii) {
        if ((size_t)length + 1 > outlen ||
            ps_read(out, addr + l->str_ascii_data, (size_t)length) != 0)
            return -1;
        out[length] = '\0';
        /* A torn or reused object could hold anything: ASCII means < 0x80. */
        for (int64_t i = 0; i < length; i++)
            if ((unsigned char)out[i] >= 0x80)
                return -1;
        return (int)length;
    }

    uint8_t buf[PS_STR_MAX * 4];
    size_t nbytes = (size_t)length * (size_t)kind;
    if (ps_read(buf, addr + l->str_compact_data, nbytes) != 0)
        return -1;
    return ps_str_to_utf8(buf, (size_t)length, kind, out, outlen);
}

int ps_bytes_read(const struct ps_layout *l, uintptr_t addr, size_t maxlen,
                  uint8_t **out, size_t *len)
{
    int64_t n;
    if (ps_read(&n, addr + l->bytes_size, sizeof n) != 0 || n < 0 || (uint64_t)n > maxlen)
        return -1;
    uint8_t *b = malloc((size_t)n + 1);
    if (b == NULL)
        return -1;
    if (ps_read(b, addr + l->bytes_sval, (size_t)n) != 0) {
        free(b);
        return -1;
    }
    *out = b;
    *len = (size_t)n;
    return 0;
}
