#!/usr/bin/env python3
"""check_macho.py - checks a cross-built libpysample.dylib without a Mac.

    check_macho.py DYLIB ARCH HEADER

Reads the Mach-O file itself (load commands, symbol table, the bind opcodes
of the __interpose section), so it needs neither Apple's tools nor LLVM's,
and prints one line per check:

    PASS <check>            or    FAIL <check>: <why>

Checks:
  arch        64-bit Mach-O dylib (MH_DYLIB) for ARCH (aarch64 or x86_64)
  minos       LC_BUILD_VERSION says macOS, minimum 11.0
  exports     every PYSAMPLE_API function of HEADER is an exported symbol,
              and nothing else is exported but the linker's own two symbols
  interpose   __DATA,__interpose holds {replacement, original} pairs whose
              originals are libSystem's sigaction, _exit and _Exit
  imports     nothing is imported from any library but libSystem

Exit status 0 when every check passed.
"""
import re
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
MH_DYLIB = 6
CPU = {"aarch64": 0x0100000C, "x86_64": 0x01000007}
LC_SYMTAB = 0x2
LC_LOAD_DYLIB = 0xC
LC_SEGMENT_64 = 0x19
LC_DYLD_INFO = 0x22
LC_DYLD_INFO_ONLY = 0x80000022
LC_BUILD_VERSION = 0x32
LC_DYLD_CHAINED_FIXUPS = 0x80000034
PLATFORM_MACOS = 1
LINKER_EXPORTS = {"__mh_dylib_header", "___dso_handle"}
INTERPOSED = {"_sigaction", "__exit", "__Exit"}


def public_api(header):
    text = open(header).read()
    return {"_" + m for m in re.findall(r"PYSAMPLE_API\b[^;(]*?\b(pysample_\w+)\s*\(", text)}


class MachO:
    def __init__(self, data):
        self.data = data
        (self.magic, self.cputype, _sub, self.filetype, ncmds, _size, _flags,
         _res) = struct.unpack_from("<IiiIIIII", data, 0)
        self.cmds = []
        off = 32
        for _ in range(ncmds if self.magic == MH_MAGIC_64 else 0):
            cmd, size = struct.unpack_from("<II", data, off)
            self.cmds.append((cmd, off, size))
            off += size

    def find(self, kind):
        return [(off, size) for cmd, off, size in self.cmds if cmd == kind]

    def symbols(self):
        """(name, n_type, n_sect) of every symbol table entry."""
        out = []
        for off, _ in self.find(LC_SYMTAB):
            symoff, nsyms, stroff, _strsize = struct.unpack_from("<IIII", self.data, off + 8)
            for i in range(nsyms):
                strx, ntype, nsect, _desc, _value = struct.unpack_from("<IBBHQ", self.data,
                                                                        symoff + 16 * i)
                end = self.data.index(b"\0", stroff + strx)
                out.append((self.data[stroff + strx:end].decode(), ntype, nsect))
        return out

    def sections(self):
        """{(segname, sectname): (addr, size, segment index)}."""
        out = {}
        seg_index = 0
        for cmd, off, _ in self.cmds:
            if cmd != LC_SEGMENT_64:
                continue
            nsects = struct.unpack_from("<I", self.data, off + 64)[0]
            for i in range(nsects):
                s = off + 72 + 80 * i
                sect = self.data[s:s + 16].rstrip(b"\0").decode()
                seg = self.data[s + 16:s + 32].rstrip(b"\0").decode()
                addr, size = struct.unpack_from("<QQ", self.data, s + 32)
                out[(seg, sect)] = (addr, size, seg_index)
            seg_index += 1
        return out

    def segment_addrs(self):
        return [struct.unpack_from("<Q", self.data, off + 24)[0]
                for cmd, off, _ in self.cmds if cmd == LC_SEGMENT_64]

    def dylibs(self):
        out = []
        for off, size in self.find(LC_LOAD_DYLIB):
            name_off = struct.unpack_from("<I", self.data, off + 8)[0]
            raw = self.data[off + name_off:off + size]
            out.append(raw.split(b"\0", 1)[0].decode())
        return out

    def binds(self):
        """(address, symbol, dylib ordinal) of the non-lazy and lazy binds
        (LC_DYLD_INFO opcodes; chained fixups are not produced by zig)."""
        out = []
        segs = self.segment_addrs()
        for kind in (LC_DYLD_INFO, LC_DYLD_INFO_ONLY):
            for off, _ in self.find(kind):
                f = struct.unpack_from("<10I", self.data, off + 8)
                bind = (f[2], f[3])
                lazy = (f[6], f[7])
                for start, size in (bind, lazy):
                    out += self._run_binds(start, size, segs)
        return out

    def _uleb(self, p):
        result = shift = 0
        while True:
            b = self.data[p]
            p += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return result, p

    def _run_binds(self, start, size, segs):
        out = []
        p, end = start, start + size
        sym, ordinal, seg, off = None, 0, 0, 0
        while p < end:
            b = self.data[p]
            p += 1
            op, imm = b & 0xF0, b & 0x0F
            if op == 0x00:            # DONE (lazy tables continue after it)
                continue
            elif op == 0x10:          # SET_DYLIB_ORDINAL_IMM
                ordinal = imm
            elif op == 0x20:          # SET_DYLIB_ORDINAL_ULEB
                ordinal, p = self._uleb(p)
            elif op == 0x30:          # SET_DYLIB_SPECIAL_IMM
                ordinal = -imm if imm else 0
            elif op == 0x40:          # SET_SYMBOL_TRAILING_FLAGS_IMM
                e = self.data.index(b"\0", p)
                sym = self.data[p:e].decode()
                p = e + 1
            elif op == 0x50:          # SET_TYPE_IMM
                pass
            elif op == 0x60:          # SET_ADDEND_SLEB
                while self.data[p] & 0x80:
                    p += 1
                p += 1
            elif op == 0x70:          # SET_SEGMENT_AND_OFFSET_ULEB
                seg = imm
                off, p = self._uleb(p)
            elif op == 0x80:          # ADD_ADDR_ULEB
                add, p = self._uleb(p)
                off = (off + add) & 0xFFFFFFFFFFFFFFFF
            elif op == 0x90:          # DO_BIND
                out.append((segs[seg] + off, sym, ordinal))
                off += 8
            elif op == 0xA0:          # DO_BIND_ADD_ADDR_ULEB
                out.append((segs[seg] + off, sym, ordinal))
                add, p = self._uleb(p)
                off = (off + 8 + add) & 0xFFFFFFFFFFFFFFFF
            elif op == 0xB0:          # DO_BIND_ADD_ADDR_IMM_SCALED
                out.append((segs[seg] + off, sym, ordinal))
                off += 8 + imm * 8
            elif op == 0xC0:          # DO_BIND_ULEB_TIMES_SKIPPING_ULEB
                count, p = self._uleb(p)
                skip, p = self._uleb(p)
                for _ in range(count):
                    out.append((segs[seg] + off, sym, ordinal))
                    off += 8 + skip
            else:
                raise ValueError("unknown bind opcode 0x%02x" % b)
        return out


def check(path, arch, header):
    results = []

    def record(name, ok, why=""):
        results.append((name, ok, why))

    data = open(path, "rb").read()
    m = MachO(data)
    ok = m.magic == MH_MAGIC_64 and m.filetype == MH_DYLIB and m.cputype == CPU[arch]
    record("arch", ok, "magic %#x filetype %d cputype %#x, want a 64-bit MH_DYLIB for %s"
           % (m.magic, m.filetype, m.cputype & 0xFFFFFFFF, arch))
    if m.magic != MH_MAGIC_64:
        return results

    bv = m.find(LC_BUILD_VERSION)
    if bv:
        platform, minos = struct.unpack_from("<II", data, bv[0][0] + 8)
        version = "%d.%d" % (minos >> 16, (minos >> 8) & 0xFF)
        record("minos", platform == PLATFORM_MACOS and minos == 11 << 16,
               "platform %d minos %s, want macOS 11.0" % (platform, version))
    else:
        record("minos", False, "no LC_BUILD_VERSION")

    syms = m.symbols()
    exported = {n for n, t, s in syms if (t & 0x0E) == 0x0E and (t & 0x01) and not (t & 0xE0)}
    want = public_api(header)
    missing = sorted(want - exported)
    extra = sorted(exported - want - LINKER_EXPORTS)
    record("exports", bool(want) and not missing and not extra,
           "missing %s, unexpected %s" % (missing or "none", extra or "none"))

    libs = m.dylibs()
    imports_ok = bool(libs) and all(lib.startswith("/usr/lib/libSystem") for lib in libs)
    record("imports", imports_ok, "links %s, want libSystem only" % libs)

    sect = m.sections().get(("__DATA", "__interpose"))
    if sect is None:
        record("interpose", False, "no __DATA,__interpose section")
    else:
        addr, size, _ = sect
        binds = {a: s for a, s, _ in m.binds()}
        # Pairs of pointers: the original is the second of each pair.
        originals = {binds.get(addr + i + 8) for i in range(0, size, 16)}
        record("interpose", size % 16 == 0 and originals == INTERPOSED,
               "originals bound: %s, want %s" % (sorted(str(o) for o in originals),
                                                 sorted(INTERPOSED)))
    return results


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in CPU:
        sys.stderr.write(__doc__)
        return 2
    failed = 0
    try:
        results = check(*sys.argv[1:])
    except (OSError, ValueError, struct.error, IndexError) as e:
        results = [("read", False, "%s: %s" % (sys.argv[1], e))]
    for name, ok, why in results:
        print("PASS %s" % name if ok else "FAIL %s: %s" % (name, why))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
