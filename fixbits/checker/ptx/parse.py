"""PTX reader: entry functions, parameters, launch bounds and a flat instruction list.

Only what the walk needs: predicates, opcodes, operands (brace lists and addresses kept whole),
labels, and register scopes (`{ .reg ... }` blocks inlined by Triton are renamed so an inner
`%p1` never aliases an outer one). Debug sections and comments are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class PTXError(ValueError):
    """Malformed or unsupported PTX text."""


class Inst:
    """One statement. Immutable by convention: instances are cached and shared between files.
    (A plain slotted class: a frozen dataclass's __init__ cost a fifth of the parse.)"""

    __slots__ = ("pred", "neg", "op", "args", "text")
    pred: str | None  # predicate register, None when unpredicated
    neg: bool  # @!%p
    op: str  # full opcode with modifiers, e.g. "add.f32", or ":label"
    args: tuple[str, ...]
    text: str

    def __init__(self, pred: str | None, neg: bool, op: str, args: tuple[str, ...], text: str) -> None:
        self.pred = pred
        self.neg = neg
        self.op = op
        self.args = args
        self.text = text

    def _fields(self) -> tuple:
        return (self.pred, self.neg, self.op, self.args, self.text)

    def __eq__(self, other: object) -> bool:
        return type(other) is Inst and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Inst(pred={self.pred!r}, neg={self.neg!r}, op={self.op!r}, args={self.args!r}, text={self.text!r})"


@dataclass
class Entry:
    name: str
    params: list[str]
    reqntid: tuple[int, int, int] | None
    insts: list[Inst] = field(default_factory=list)


_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/|^[ \t]*\.(?:loc|file)\b[^\n]*$", re.S | re.M)
_ENTRY_RE = re.compile(r"\.entry\s+([\w$.]+)\s*\(")
_NTID_RE = re.compile(r"\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_REGDECL_RE = re.compile(r"\.reg\s+(?:\.v\d\s+)?\.\w+\s+(.+)")


def split_args(s: str) -> list[str]:
    """Split operands on top-level commas (not inside [] or {}); memoised on the text (operand
    lists repeat between statements, files and the walk's passes; callers get their own list)."""
    got = _SPLIT_CACHE.get(s)
    if got is None:
        if len(_SPLIT_CACHE) > 100_000:
            _SPLIT_CACHE.clear()
        got = _SPLIT_CACHE[s] = tuple(_split_args(s))
    return list(got)


_SPLIT_CACHE: dict[str, tuple[str, ...]] = {}


def _split_tuple(s: str) -> tuple[str, ...]:
    """split_args as the memoised tuple itself (for the parser, which keeps a tuple)."""
    got = _SPLIT_CACHE.get(s)
    if got is None:
        if len(_SPLIT_CACHE) > 100_000:
            _SPLIT_CACHE.clear()
        got = _SPLIT_CACHE[s] = tuple(_split_args(s))
    return got


def _split_args(s: str) -> list[str]:
    if "[" not in s and "{" not in s and "]" not in s and "}" not in s:  # no nesting: a plain split
        parts = [p.strip() for p in s.split(",")]
        if parts[-1] == "":
            parts.pop()
        return parts
    out: list[str] = []
    depth = 0
    last = 0
    for m in _DELIMS.finditer(s):
        ch = m.group()
        if ch == "[" or ch == "{":
            depth += 1
        elif ch == "]" or ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(s[last : m.start()].strip())
            last = m.end()
    tail = s[last:].strip()
    if tail:
        out.append(tail)
    return out


_DELIMS = re.compile(r"[\[\]{},]")


_BRACKETS = {"(": re.compile(r"[()]"), "{": re.compile(r"[{}]")}


def _match_paren(text: str, start: int, open_ch: str, close_ch: str) -> int:
    depth = 0
    for m in _BRACKETS[open_ch].finditer(text, start):
        if m.group() == open_ch:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    raise PTXError(f"unbalanced '{open_ch}' at offset {start}")


_LABEL_HEAD = re.compile(r"\s*([$A-Za-z_][\w$]*):(?!:)")


def _statements(body: str) -> list[str]:
    """Statements of a function body; '{' and '}' that open/close scopes become their own items.

    Operand braces never hold a ';', so the body splits on ';' first; what precedes a statement
    in its chunk is scope braces and labels.
    """
    out: list[str] = []
    for chunk in body.split(";"):
        rest = chunk
        while True:
            rest = rest.lstrip()
            if not rest:
                break
            if rest[0] in "{}":
                out.append(rest[0])
                rest = rest[1:]
                continue
            m = _LABEL_HEAD.match(rest)
            if m:
                out.append(m.group(1) + ":")
                rest = rest[m.end() :]
                continue
            out.append(rest.strip())
            break
    return out


_STMT_RE = re.compile(r"^(?:@(!?)(%?[\w$]+)\s+)?([a-zA-Z_][\w.:]*)\s*(.*)$", re.S)


def parse_ptx(text: str) -> list[Entry]:
    """Every `.entry` of a PTX module, in order."""
    if not isinstance(text, str):
        raise PTXError("PTX must be text")
    clean = _COMMENT_RE.sub("", text)
    entries: list[Entry] = []
    pos = 0
    while True:
        m = _ENTRY_RE.search(clean, pos)
        if not m:
            break
        name = m.group(1)
        pstart = m.end() - 1
        pend = _match_paren(clean, pstart, "(", ")")
        params = []
        for p in split_args(clean[pstart + 1 : pend]):
            toks = p.split()
            if toks:
                params.append(toks[-1].split("[")[0])
        bstart = clean.find("{", pend)
        if bstart < 0:
            raise PTXError(f"entry {name}: no body")
        header = clean[pend + 1 : bstart]
        ntid = None
        nm = _NTID_RE.search(header)
        if nm:
            ntid = (int(nm.group(2)), int(nm.group(3) or 1), int(nm.group(4) or 1))
        bend = _match_paren(clean, bstart, "{", "}")
        entry = Entry(name, params, ntid)
        entry.insts = _instructions(clean[bstart + 1 : bend], name)
        entries.append(entry)
        pos = bend + 1
    if not entries:
        raise PTXError("no .entry function found")
    return entries


def _scope_labels(stmts: list[str]) -> dict[str, set[str]]:
    """Labels defined inside each inner scope (PTX labels in a { } block are local to it)."""
    out: dict[str, set[str]] = {}
    stack = ["0"]
    sid = 0
    for st in stmts:
        if st == "{":
            sid += 1
            stack.append(str(sid))
        elif st == "}":
            if len(stack) > 1:
                stack.pop()
        elif st.endswith(":") and " " not in st and len(stack) > 1:
            out.setdefault(stack[-1], set()).add(st[:-1])
    return out


def _instructions(body: str, name: str) -> list[Inst]:
    insts: list[Inst] = []
    scopes: list[dict[str, str]] = [{}]
    scope_id = 0
    stmts = _statements(body)
    local_labels = _scope_labels(stmts)
    cache_get = _INST_CACHE.get
    for st in stmts:
        if len(scopes) == 1:
            # (labels, braces and directives are never cached, so a hit is an instruction)
            hit = cache_get(st)
            if hit is not None:
                insts.append(hit)
                continue
        if st == "{":
            scope_id += 1
            sc = {"__id__": str(scope_id)}
            for lab in local_labels.get(str(scope_id), ()):
                sc[lab] = f"{lab}@{scope_id}"
            scopes.append(sc)
            continue
        if st == "}":
            if len(scopes) == 1:
                raise PTXError(f"entry {name}: unbalanced '}}'")
            scopes.pop()
            continue
        if not st:
            continue
        if st.endswith(":") and " " not in st:
            lab = st[:-1]
            if len(scopes) > 1:
                lab = _rename_label(lab, scopes)
            insts.append(Inst(None, False, ":" + lab, (), st))
            continue
        if st.startswith("."):
            dm = _REGDECL_RE.match(st)
            if dm and len(scopes) > 1:
                sid = scopes[-1]["__id__"]
                for reg in split_args(dm.group(1)):
                    reg = reg.strip()
                    rm = re.match(r"(%[\w$]+)<(\d+)>", reg)
                    if rm:
                        for i in range(int(rm.group(2))):
                            scopes[-1][f"{rm.group(1)}{i}"] = f"{rm.group(1)}{i}@{sid}"
                    elif reg:
                        scopes[-1][reg] = f"{reg}@{sid}"
            continue  # other directives (.loc, .pragma, .shared) carry no value semantics
        top = len(scopes) == 1
        m = _STMT_RE.match(st)
        if not m:
            raise PTXError(f"entry {name}: cannot read statement {st[:80]!r}")
        neg, pred, op, rest = m.groups()
        args = _split_tuple(rest)
        if len(scopes) > 1:
            args = tuple(_rename(a, scopes) for a in args)
            if pred:
                pred = _rename(pred, scopes)
            if op.split(".")[0] == "bra" and args:
                args = (_rename_label(args[0], scopes),) + args[1:]
        inst = Inst(pred, bool(neg), op, args, st)
        if top:
            if len(_INST_CACHE) > 200_000:
                _INST_CACHE.clear()
            _INST_CACHE[st] = inst
        insts.append(inst)
    return insts


# statement text -> instruction, for statements outside inner scopes (no register renaming):
# the configs of one kernel share most of their lines, and an Inst is immutable
_INST_CACHE: dict[str, Inst] = {}


_REG_RE = re.compile(r"%[\w$]+")


def _rename_label(lab: str, scopes: list[dict[str, str]]) -> str:
    for sc in reversed(scopes):
        if lab in sc:
            return sc[lab]
    return lab


def _rename(arg: str, scopes: list[dict[str, str]]) -> str:
    def sub(m: re.Match[str]) -> str:
        r = m.group(0)
        for sc in reversed(scopes):
            if r in sc:
                return sc[r]
        return r

    return _REG_RE.sub(sub, arg)
