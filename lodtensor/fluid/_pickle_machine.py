"""A pickle machine that runs nothing: the opcodes of plain data, with globals resolved to stand-ins.

Python's unpickler calls whatever a pickle names. This machine reads the
opcodes itself and knows only those that a pickle of dicts, lists, tuples,
strings, bytes, numbers and reduced objects uses (protocols 2 to 5, as
``pickle.dumps`` writes them); any other opcode is refused. A GLOBAL is looked
up in a table the caller gives, whose values are :class:`Global` stand-ins: a
REDUCE calls the stand-in's function with the (already built) arguments, a
BUILD calls ``build(state)`` on an object of one of the caller's types. No
class is instantiated and no ``__setstate__`` runs. Everything is bounded: the
number of opcodes, the stack, the marks, integer sizes, and memo indices (below
the number of opcodes read so far, so the memo grows by at most one entry per
opcode); a length is checked against the bytes present before anything is
read, and byte strings are zero-copy views of the input.

>>> table = {("builtins", "tuple"): Global("tuple", tuple)}
>>> run(memoryview(b"\\x80\\x04]\\x94(K\\x01\\x8c\\x01a\\x94e."), table, ())
[1, 'a']
>>> run(memoryview(b"\\x80\\x04\\x8c\\x02os\\x8c\\x06system\\x93."), table, ())
Traceback (most recent call last):
...
lodtensor.fluid._pickle_machine.Refused: refusing to load os.system: only the listed NumPy and container
globals are admitted
"""

import reprlib
import struct

__all__ = ["Refused", "Global", "run", "short"]

MAX_OPS = 1 << 22  # a .pdparams array takes ~40 opcodes: room for 100,000 arrays
MAX_STACK = 1 << 16  # pickle batches SETITEMS / APPENDS by 1,000 items
MAX_MARKS = 64
MAX_LONG = 32  # bytes of a LONG1 / LONG4 integer
MAX_LINE = 256  # a GLOBAL's module or name
TRUNCATED = "truncated or corrupted .pdparams file"


class Refused(ValueError):
    """Bad input found while parsing; the caller adds the file name."""


class Global:
    """An admitted global: a REDUCE on it returns ``fn(args)``, ``args`` a tuple of parsed objects."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def __repr__(self):
        return self.name


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60


def short(obj):
    """A repr of ``obj`` of at most 80 characters, for messages: never deep, never long, whatever the file built."""
    text = _REPR.repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


class _Machine:
    def __init__(self, buf, table, buildable):
        self.buf, self.table, self.buildable = buf, table, buildable
        self.stack, self.marks, self.memo, self.ops = [], [], {}, 0

    # arguments ------------------------------------------------------------------------------------
    def take(self, pos, n, name, start):
        if n < 0 or n > len(self.buf) - pos:
            raise Refused(f"{TRUNCATED}: {name} at offset {start} needs {n} bytes, {len(self.buf) - pos} left")
        return pos + n, self.buf[pos : pos + n]

    def fixed(self, fmt, pos, name, start):
        pos, raw = self.take(pos, struct.calcsize(fmt), name, start)
        return pos, struct.unpack(fmt, raw)[0]

    def counted(self, fmt, decode, pos, name, start):
        pos, n = self.fixed(fmt, pos, name, start)
        pos, raw = self.take(pos, n, name, start)
        if decode is None:
            return pos, raw
        try:
            return pos, str(raw, decode, "surrogatepass" if decode == "utf-8" else "strict")
        except UnicodeDecodeError:
            raise Refused(f"{TRUNCATED}: {name} at offset {start} is not {decode} text") from None

    def long(self, fmt, pos, name, start):
        pos, n = self.fixed(fmt, pos, name, start)
        if not 0 <= n <= MAX_LONG:
            raise Refused(f"{name} at offset {start} has {n} bytes; an integer here has at most {MAX_LONG}")
        pos, raw = self.take(pos, n, name, start)
        return pos, int.from_bytes(raw, "little", signed=True)

    def lines(self, pos, name, start):
        parts = []
        for _ in range(2):
            end = bytes(self.buf[pos : pos + MAX_LINE + 1]).find(b"\n")
            if end < 0:
                raise Refused(f"{TRUNCATED}: {name} at offset {start} has no line end within {MAX_LINE} bytes")
            try:
                parts.append(str(self.buf[pos : pos + end], "ascii"))
            except UnicodeDecodeError:
                raise Refused(f"{name} at offset {start} names a module or class that is not ASCII") from None
            pos += end + 1
        return pos, tuple(parts)

    # the stack ------------------------------------------------------------------------------------
    def fence(self):
        return self.marks[-1] if self.marks else 0

    def push(self, obj):
        if len(self.stack) >= MAX_STACK:
            raise Refused(f"the pickle stack grows past {MAX_STACK} items")
        self.stack.append(obj)

    def pop(self, what):
        if len(self.stack) <= self.fence():
            raise Refused(f"{TRUNCATED}: {what} finds no object on the stack")
        return self.stack.pop()

    def pop_mark(self, what):
        if not self.marks:
            raise Refused(f"{TRUNCATED}: {what} without a MARK")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def top(self, kind, what):
        if len(self.stack) <= self.fence() or type(self.stack[-1]) is not kind:
            raise Refused(f"{TRUNCATED}: {what} needs a {kind.__name__} below its items")
        return self.stack[-1]

    # opcodes --------------------------------------------------------------------------------------
    def mark(self, _):
        if len(self.marks) >= MAX_MARKS:
            raise Refused(f"more than {MAX_MARKS} nested MARKs")
        self.marks.append(len(self.stack))

    def put(self, index):
        if not 0 <= index < self.ops:
            raise Refused(f"memo index {index} at opcode {self.ops}: a memo index stays below the opcodes read")
        if len(self.stack) <= self.fence():
            raise Refused(f"{TRUNCATED}: a memo PUT finds no object on the stack")
        self.memo[index] = self.stack[-1]

    def get(self, index):
        if index not in self.memo:
            raise Refused(f"{TRUNCATED}: memo entry {index} is read before it is written")
        self.push(self.memo[index])

    def dup(self, _):
        if len(self.stack) <= self.fence():
            raise Refused(f"{TRUNCATED}: DUP finds no object on the stack")
        self.push(self.stack[-1])

    def tuple_n(self, n):
        items = [self.pop("TUPLE") for _ in range(n)]
        self.push(tuple(reversed(items)))

    def appends(self, items):
        self.top(list, "APPENDS").extend(items)

    def setitems(self, items, target=None):
        if len(items) % 2:
            raise Refused(f"{TRUNCATED}: SETITEMS with an odd number of items")
        target = self.top(dict, "SETITEMS") if target is None else target
        for i in range(0, len(items), 2):
            if type(items[i]) not in (str, int):
                raise Refused(f"a dict key is a {type(items[i]).__name__} ({short(items[i])}), expected a str")
            target[items[i]] = items[i + 1]

    def dict_(self, _):
        out = {}
        self.setitems(self.pop_mark("DICT"), out)
        self.push(out)

    def global_(self, module, name):
        found = self.table.get((module, name))
        if found is None:
            raise Refused(f"refusing to load {module}.{name}: only the listed NumPy and container globals are admitted")
        self.push(found)

    def stack_global(self, _):
        name, module = self.pop("STACK_GLOBAL"), self.pop("STACK_GLOBAL")
        if type(module) is not str or type(name) is not str:
            raise Refused(f"STACK_GLOBAL needs two strings, got {short(module)} and {short(name)}")
        self.global_(module, name)

    def reduce(self, _):
        args, fn = self.pop("REDUCE"), self.pop("REDUCE")
        if not isinstance(fn, Global):
            raise Refused(f"REDUCE calls a {type(fn).__name__}; only the admitted globals are called")
        if type(args) is not tuple:
            raise Refused(f"REDUCE passes a {type(args).__name__} to {fn.name}, expected a tuple of arguments")
        self.push(fn.fn(args))

    def build(self, _):
        state, target = self.pop("BUILD"), self.pop("BUILD")
        if not isinstance(target, self.buildable):
            raise Refused(f"BUILD sets the state of a {type(target).__name__}; only arrays and dtypes have one")
        target.build(state)
        self.push(target)

    def run(self):
        buf, n = self.buf, len(self.buf)
        if n < 2 or buf[0] != 0x80 or not 2 <= buf[1] <= 5:
            raise Refused(f"not a .pdparams file: it does not start with a pickle protocol 2-5 marker "
                          f"(first bytes {bytes(buf[:2])!r})")
        pos = start = 2
        while True:
            if pos >= n:
                raise Refused(f"{TRUNCATED}: the pickle ends at offset {n} without STOP")
            code, start = buf[pos], pos
            self.ops += 1
            if self.ops > MAX_OPS:
                raise Refused(f"more than {MAX_OPS} pickle opcodes")
            entry = _OPS.get(code)
            if entry is None:
                raise Refused(f"opcode {_opname(code)} at offset {start} is not used in a .pdparams file")
            name, read, act = entry
            pos, arg = (pos + 1, None) if read is None else read(self, pos + 1, name, start)
            if act is None:  # STOP
                break
            act(self, arg)
        if len(self.stack) != 1 or self.marks:
            raise Refused(f"{TRUNCATED}: STOP at offset {start} leaves {len(self.stack)} objects and "
                          f"{len(self.marks)} marks (one object expected)")
        if pos != n:
            raise Refused(f"{n - pos} bytes after the end of the pickle (offset {pos})")
        return self.stack[0]


def _opname(code):
    import pickletools  # noqa: PLC0415 - names for the error message only

    for op in pickletools.opcodes:
        if ord(op.code) == code:
            return f"{op.name} ({bytes([code])!r})"
    return repr(bytes([code]))


def _fixed(fmt):
    return lambda m, pos, name, start: m.fixed(fmt, pos, name, start)


def _counted(fmt, decode):
    return lambda m, pos, name, start: m.counted(fmt, decode, pos, name, start)


def _long(fmt):
    return lambda m, pos, name, start: m.long(fmt, pos, name, start)


def _const(value):
    return lambda m, _: m.push(value)


def _fresh(kind):
    return lambda m, _: m.push(kind())


_M = _Machine
#: opcode -> (name, argument reader or None, action(machine, argument) or None for STOP)
_OPS = {
    0x95: ("FRAME", _fixed("<Q"), lambda m, _: None),
    ord("."): ("STOP", None, None),
    ord("("): ("MARK", None, _M.mark),
    ord("0"): ("POP", None, lambda m, _: m.pop("POP")),
    ord("1"): ("POP_MARK", None, lambda m, _: m.pop_mark("POP_MARK")),
    ord("2"): ("DUP", None, _M.dup),
    ord("N"): ("NONE", None, _const(None)),
    0x88: ("NEWTRUE", None, _const(True)),
    0x89: ("NEWFALSE", None, _const(False)),
    ord("J"): ("BININT", _fixed("<i"), _M.push),
    ord("K"): ("BININT1", _fixed("<B"), _M.push),
    ord("M"): ("BININT2", _fixed("<H"), _M.push),
    0x8A: ("LONG1", _long("<B"), _M.push),
    0x8B: ("LONG4", _long("<i"), _M.push),
    ord("G"): ("BINFLOAT", _fixed(">d"), _M.push),
    ord("X"): ("BINUNICODE", _counted("<I", "utf-8"), _M.push),
    0x8C: ("SHORT_BINUNICODE", _counted("<B", "utf-8"), _M.push),
    0x8D: ("BINUNICODE8", _counted("<Q", "utf-8"), _M.push),
    ord("T"): ("BINSTRING", _counted("<i", "latin-1"), _M.push),  # Python 2 str, read as Paddle does (latin1)
    ord("U"): ("SHORT_BINSTRING", _counted("<B", "latin-1"), _M.push),
    ord("B"): ("BINBYTES", _counted("<I", None), _M.push),
    ord("C"): ("SHORT_BINBYTES", _counted("<B", None), _M.push),
    0x8E: ("BINBYTES8", _counted("<Q", None), _M.push),
    0x96: ("BYTEARRAY8", _counted("<Q", None), _M.push),
    ord("}"): ("EMPTY_DICT", None, _fresh(dict)),
    ord("]"): ("EMPTY_LIST", None, _fresh(list)),
    ord(")"): ("EMPTY_TUPLE", None, _const(())),
    ord("t"): ("TUPLE", None, lambda m, _: m.push(tuple(m.pop_mark("TUPLE")))),
    0x85: ("TUPLE1", None, lambda m, _: m.tuple_n(1)),
    0x86: ("TUPLE2", None, lambda m, _: m.tuple_n(2)),
    0x87: ("TUPLE3", None, lambda m, _: m.tuple_n(3)),
    ord("l"): ("LIST", None, lambda m, _: m.push(m.pop_mark("LIST"))),
    ord("d"): ("DICT", None, _M.dict_),
    ord("a"): ("APPEND", None, lambda m, _: m.appends([m.pop("APPEND")])),
    ord("e"): ("APPENDS", None, lambda m, _: m.appends(m.pop_mark("APPENDS"))),
    ord("s"): ("SETITEM", None, lambda m, _: m.setitems([*reversed([m.pop("SETITEM"), m.pop("SETITEM")])])),
    ord("u"): ("SETITEMS", None, lambda m, _: m.setitems(m.pop_mark("SETITEMS"))),
    ord("q"): ("BINPUT", _fixed("<B"), _M.put),
    ord("r"): ("LONG_BINPUT", _fixed("<I"), _M.put),
    0x94: ("MEMOIZE", None, lambda m, _: m.put(len(m.memo))),
    ord("h"): ("BINGET", _fixed("<B"), _M.get),
    ord("j"): ("LONG_BINGET", _fixed("<I"), _M.get),
    ord("c"): ("GLOBAL", _M.lines, lambda m, arg: m.global_(*arg)),
    0x93: ("STACK_GLOBAL", None, _M.stack_global),
    ord("R"): ("REDUCE", None, _M.reduce),
    ord("b"): ("BUILD", None, _M.build),
}


def run(buf, table, buildable):
    """The object a pickle (``buf``: a byte memoryview) describes, built only from plain data and ``table``.

    ``table`` maps ``(module, name)`` to :class:`Global` stand-ins; ``buildable``
    is the tuple of types a BUILD may set the state of (through their ``build``
    method). Raises :class:`Refused` (a ValueError) for anything else, a
    truncated pickle, or bytes after its STOP.

    Examples
    --------
    >>> run(memoryview(b"\\x80\\x02}q\\x00X\\x01\\x00\\x00\\x00aK\\x07s."), {}, ())
    {'a': 7}
    """
    return _Machine(buf, table, buildable).run()
