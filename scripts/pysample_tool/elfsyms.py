# elfsyms.py - function symbols of an ELF object, for the native frames the
# library could not name (`lib.so+0x2e2cb0`: no symbol it reads covers the
# address).  The library reads .symtab, else .dynsym, and names an address
# only inside a symbol's size.  This reads more: .symtab and .dynsym both,
# and the MiniDebugInfo some distributions put in stripped objects (a
# .gnu_debugdata section: an xz-compressed ELF whose .symtab lists the
# static functions), which a C library with no xz decoder cannot.
#
# 64-bit little-endian ELF only (x86-64, aarch64: where native frames exist).
#
# SPDX-License-Identifier: MIT

import bisect
import mmap
import os
import struct

try:
    import lzma
except ImportError:             # a Python built without it: no MiniDebugInfo
    lzma = None

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_SHN_UNDEF = 0
_MAX_SIZE = 1 << 31             # objects bigger than this are not read


def _sections(data):
    """{name: (type, offset, size, link)} and the list in index order, or
    ({}, []) for what is not a 64-bit little-endian ELF."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}, []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize != 64 or shoff + shnum * 64 > len(data) or shstrndx >= shnum:
        return {}, []
    table = []
    for i in range(shnum):
        name, kind, _flags, _addr, offset, size, link = struct.unpack_from("<IIQQQQI", data, shoff + i * 64)
        if offset + size > len(data) and kind != 8:      # SHT_NOBITS has no bytes
            return {}, []
        table.append((name, kind, offset, size, link))
    _, _, str_off, str_size, _ = table[shstrndx]
    names = data[str_off:str_off + str_size]
    by_name = {}
    for name, kind, offset, size, link in table:
        end = names.find(b"\0", name)
        by_name[names[name:end].decode("ascii", "replace")] = (kind, offset, size, link)
    return by_name, table


def _functions(data):
    """[(value, size, name)] of the function symbols of .symtab and .dynsym,
    whether there was a .symtab, and the sections by name."""
    by_name, table = _sections(data)
    out = []
    full = any(t[1] == _SHT_SYMTAB for t in table)
    for kind, offset, size, link in [(t[1], t[2], t[3], t[4]) for t in table]:
        if kind not in (_SHT_SYMTAB, _SHT_DYNSYM) or link >= len(table):
            continue
        _, _, str_off, str_size, _ = table[link]
        strings = data[str_off:str_off + str_size]
        for at in range(offset, offset + size - 23, 24):
            name, info, _other, shndx, value, sym_size = struct.unpack_from("<IBBHQQ", data, at)
            if info & 0xF not in (_STT_FUNC, _STT_GNU_IFUNC) or value == 0 or shndx == _SHN_UNDEF:
                continue
            end = strings.find(b"\0", name)
            if end > name:
                out.append((value, sym_size, strings[name:end].decode("utf-8", "replace")))
    return out, full, by_name


class Symbols(object):
    """The function symbols of one object, by address.  complete: they
    include the static functions (a .symtab, or MiniDebugInfo's), so that
    an address past the nearest one is in that function's tail or padding,
    not in some other function.  .dynsym alone lists only what the object
    exports: past the nearest exported function lies any number of static
    ones (numpy's _multiarray_umath: everything after `xerbla_`), and that
    name would be wrong."""

    def __init__(self, entries, complete):
        entries = sorted(set(entries))
        self.starts = [e[0] for e in entries]
        self.entries = entries
        self.complete = complete

    def lookup(self, offset):
        """(name, inside) of the function symbol at or below offset: inside
        when its size covers it (or it has none); past it only when the
        table is complete.  None otherwise."""
        i = bisect.bisect_right(self.starts, offset)
        if i == 0:
            return None
        # Of several symbols at that address, one with a size that covers it.
        best = None
        j = i - 1
        while j >= 0 and self.starts[j] == self.starts[i - 1]:
            value, size, name = self.entries[j]
            if size == 0 or offset < value + size:
                return name, True
            best = best or name
            j -= 1
        return (best, False) if self.complete else None


def read_symbols(path):
    """Symbols of the object at path, MiniDebugInfo included; None when it
    cannot be read or is not an ELF object we read."""
    # Mapped, not read: a libpython with its debug information is tens of
    # megabytes, of which the symbol tables are a small part.
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not 64 <= size <= _MAX_SIZE:
                return None
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        return _symbols(data)
    finally:
        data.close()


def _symbols(data):
    entries, complete, by_name = _functions(data)
    if not by_name:
        return None
    debugdata = by_name.get(".gnu_debugdata")
    if debugdata is not None and lzma is not None:
        _, offset, size, _ = debugdata
        try:
            inner = lzma.decompress(data[offset:offset + size])
        except (lzma.LZMAError, EOFError):
            inner = b""
        if len(inner) <= _MAX_SIZE:
            more, complete_inner, _ = _functions(inner)
            entries.extend(more)
            complete = complete or complete_inner
    return Symbols(entries, complete)


class LoadedObjects(object):
    """The objects a process tree has mapped, seen from /proc while it runs
    (record --native), so that its profiles' `lib.so+0x...` frames, which
    name an object by its base name only, can be looked up afterwards.
    A base name mapped from two paths is left alone: which one a frame is
    cannot be told."""

    def __init__(self):
        self.paths = {}             # base name -> set of paths
        self.symbols = {}           # path -> Symbols or None

    def scan(self, pid):
        """Adds the executable file mappings of pid and its descendants."""
        for p in _process_tree(pid):
            try:
                with open("/proc/%d/maps" % p) as f:
                    lines = f.read().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                fields = line.split(None, 5)
                if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
                    path = fields[5]
                    if path.endswith(" (deleted)"):
                        continue
                    self.paths.setdefault(path.rsplit("/", 1)[-1], set()).add(path)

    def resolve(self, basename, offset):
        paths = self.paths.get(basename)
        if not paths or len(paths) != 1:
            return None
        path, = paths
        if path not in self.symbols:
            self.symbols[path] = read_symbols(path)
        symbols = self.symbols[path]
        return symbols.lookup(offset) if symbols is not None else None


def _process_tree(pid):
    """pid and its descendants (/proc/PID/task/TID/children)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.append(p)
        try:
            tasks = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for tid in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    todo.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                pass
    return seen
