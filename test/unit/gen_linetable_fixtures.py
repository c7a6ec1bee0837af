"""Writes line-table fixtures for test/unit/test_linetable.c.

Run it under each interpreter whose tables the test should cover; it writes
test/unit/fixtures/linetable-<version>.txt next to this script (or --out):

    for py in $(pyenv root)/versions/3.{9,10,11,12,13}*/bin/python3 \\
              /usr/bin/python3.11; do
        $py test/unit/gen_linetable_fixtures.py
    done

The fixtures are committed so the C test does not depend on the interpreters
a machine happens to have.  Format, one code object per three lines:

    code <format> <firstlineno> <naddrs> <name>
    tab <raw table bytes in hex, or ->
    exp <line>[*<count>] ...     (expected line of each address, run-length)

Addresses are byte offsets 0, 2, 4, ... for formats 1 (3.9 co_lnotab) and 2
(3.10 co_linetable) and code units 0, 1, 2, ... for format 3 (3.11+
co_linetable); -1 means "no line".  The expected lines come from the
interpreter itself (dis.findlinestarts on 3.9, co_lines() on 3.10+), never
from the decoder under test, and are cross-checked against the interpreter's
PyCode_Addr2Line through ctypes.
"""

import argparse
import ctypes
import dis
import importlib.util
import os
import platform
import sys

V = sys.version_info[:2]
FMT = 1 if V < (3, 10) else 2 if V < (3, 11) else 3
# Kept short so that the committed fixtures stay small (~200 KB each).
STDLIB = ["inspect", "argparse", "json.decoder"]


def long_function(gap):
    """A function whose statements are `gap` lines apart, plus one call
    spread over `gap` lines so that the call is attributed back to its first
    line: line deltas of +gap and -gap, in both branches of a loop."""
    pad = "\n" * gap
    return (
        "def long_{g}(a, b):\n"
        "    x = a + b\n{p}"
        "    for i in range(a):\n"
        "        x += i\n{p}"
        "        if x > 3:\n{p}"
        "            x -= 1\n"
        "    y = max(a,{p}            b,{p}            x)\n"
        "    return x + y\n"
    ).format(g=gap, p=pad)


def huge_expression():
    """One line with so much bytecode that the next line starts more than
    255 bytes later (split into several lnotab/linetable pairs without a line
    change)."""
    items = ", ".join("a%d * %d" % (i % 7, i) for i in range(300))
    return ("def huge(a0, a1, a2, a3, a4, a5, a6):\n"
            "    x = [" + items + "]\n"
            "    return x\n")


SNIPPETS = [
    # loops, break/continue, else clauses
    """
def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        while total < i:
            total += 1
            if total > 100:
                break
        else:
            total -= 1
    else:
        total += 7
    return total
""",
    # try/except/finally, nested, with re-raise and return in finally
    """
def exceptions(f):
    try:
        f()
    except (ValueError, TypeError) as e:
        print(e)
        raise
    except Exception:
        pass
    else:
        return 1
    finally:
        try:
            f()
        finally:
            print("done")
    return 2
""",
    # with-blocks, single and multiple managers
    """
def withs(p, q):
    with open(p) as f, \\
            open(q) as g:
        data = f.read()
    with p:
        with q as r:
            r.write(data)
    return data
""",
    # comprehensions and generator expressions, multi-line
    """
def comps(xs):
    a = [x * 2 for x in xs if x]
    b = {x: y
         for x in xs
         for y in range(x)
         if y % 2}
    c = {x for x in xs}
    d = sum(x for x in xs
            if x > 1)
    return a, b, c, d
""",
    # lambdas, closures, decorators, class bodies
    """
import functools

def deco(arg):
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*a, **kw):
            return fn(*a, **kw) + arg
        return inner
    return wrap

@deco(
    3
)
def decorated(x,
              y=lambda z: z + 1):
    return (lambda q:
            q * x)(y(x))

class K:
    attr = [lambda: 1, lambda: 2]

    @property
    def prop(self):
        return self.attr

    @staticmethod
    def st(a,
           b):
        return a if a else \\
            b
""",
    # multi-line expressions, chained calls, f-strings, walrus
    """
def multi(obj, n):
    r = (obj
         .method(1,
                 2)
         .other(
             n,
         ))
    s = f"{n} and {obj!r:>{n}}"
    if (m := len(s)) > 3 and \\
            m < 10:
        return r
    return [
        1,
        2,
        n,
    ]
""",
    # generators and yield from
    """
def gen(xs):
    for x in xs:
        yield x
    yield from (y * 2 for y in xs)
    return (yield)
""",
    # async def, await, async for/with, async comprehensions
    """
async def coro(src, lock):
    async with lock:
        async for item in src:
            await item
    r = [x async for x in src]
    try:
        await lock.acquire()
    finally:
        lock.release()
    return r
""",
    # global statements, del, assert, augmented assignments, unpacking
    """
G = 1
a, *b = [1, 2, 3]
assert a == 1, "msg"
del b
for _i in range(2):
    G += _i
if G:
    pass
""",
]

# Snippets that only compile on newer interpreters; SyntaxError means skip.
SNIPPETS_NEW = [
    # match statements (3.10+)
    """
def matcher(cmd):
    match cmd:
        case ["go", direction]:
            return direction
        case {"x": x, "y": y} if x > y:
            return x
        case Point(x=0,
                   y=yy):
            return yy
        case 1 | 2 | 3:
            return "small"
        case _:
            return None
""",
    # exception groups (3.11+)
    """
def groups(f):
    try:
        f()
    except* ValueError as eg:
        print(eg)
    except* TypeError:
        raise
""",
    # type parameters and type aliases (3.12+)
    """
type Alias[T] = list[T]

def generic[T: int](x: T) -> T:
    return x

class Box[T]:
    def get(self) -> T:
        return self.v
""",
]


def sources():
    for i, src in enumerate(SNIPPETS + SNIPPETS_NEW):
        yield "snippet%d" % i, src
    for gap in (100, 130, 300, 1000):
        yield "long%d" % gap, long_function(gap)
    yield "huge", huge_expression()
    for mod in STDLIB:
        spec = importlib.util.find_spec(mod)
        with open(spec.origin, encoding="utf-8") as f:
            yield mod, f.read()


def walk(code, prefix):
    name = prefix + "." + code.co_name
    yield name, code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from walk(c, name)


def table(code):
    return code.co_lnotab if FMT == 1 else code.co_linetable


def expected_lines(code):
    """Line of each address, from the interpreter's own line iterators."""
    nbytes = len(code.co_code)
    if FMT == 1:
        # 3.9: a line start holds until the next one (findlinestarts only
        # reports changes).
        starts = dict(dis.findlinestarts(code))
        lines, cur = [], code.co_firstlineno
        for off in range(0, nbytes, 2):
            cur = starts.get(off, cur)
            lines.append(cur)
        return lines
    # co_lines() speaks bytes on every version; an instruction (3.10) or
    # code unit (3.11+) is 2 bytes.  Uncovered addresses have no line.
    lines = [-1] * (nbytes // 2)
    for start, end, line in code.co_lines():
        for off in range(start, end, 2):
            lines[off // 2] = -1 if line is None else line
    return lines


ADDR2LINE = ctypes.pythonapi.PyCode_Addr2Line
ADDR2LINE.argtypes = [ctypes.py_object, ctypes.c_int]
ADDR2LINE.restype = ctypes.c_int


def cross_check(name, code, lines):
    """PyCode_Addr2Line (what f_lineno uses) takes byte offsets on every
    version; the fixture must agree with it, or the oracle is wrong."""
    bad = [(2 * i, l, ADDR2LINE(code, 2 * i)) for i, l in enumerate(lines)
           if ADDR2LINE(code, 2 * i) != l]
    if bad:
        sys.stderr.write("%s: %d disagreement(s) with PyCode_Addr2Line, "
                         "first (byte offset, fixture, C API): %r\n"
                         % (name, len(bad), bad[:3]))
    return len(bad)


def rle(lines):
    out, i = [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j] == lines[i]:
            j += 1
        out.append(str(lines[i]) if j - i == 1 else "%d*%d" % (lines[i], j - i))
        i = j
    return " ".join(out)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(
        here, "fixtures", "linetable-%s.txt" % platform.python_version()))
    args = ap.parse_args()

    ncode = naddr = ndis = 0
    out = ["# line tables of python %s (%s), format %d"
           % (platform.python_version(), sys.executable, FMT)]
    for label, src in sources():
        try:
            top = compile(src, label, "exec")
        except SyntaxError:
            continue
        for name, code in walk(top, label):
            lines = expected_lines(code)
            ndis += cross_check(name, code, lines)
            tab = table(code)
            out.append("code %d %d %d %s" % (FMT, code.co_firstlineno,
                                             len(lines), name))
            out.append("tab " + (tab.hex() if tab else "-"))
            out.append("exp " + rle(lines))
            ncode += 1
            naddr += len(lines)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d code objects, %d addresses, %d PyCode_Addr2Line "
          "disagreements" % (args.out, ncode, naddr, ndis))


if __name__ == "__main__":
    main()
