"""From the roots of a walk to one signature per stored output and one per kernel.

Each root is first rewritten in its output's own coordinates when that leaves a tree free of
thread, block and iteration symbols (then which thread stored it no longer matters); otherwise it
stays physical and the launch bound joins the signature. A kernel the walk could not model keeps
its normalised text as the signature: it can only ever equal a copy of itself.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from fixbits.checker.node import Node, Root, int_node
from fixbits.checker.walk import relativize


@dataclass(frozen=True)
class OutputSignature:
    """All distinct trees stored through one pointer parameter."""

    param: str
    digest: str
    roots: tuple[Root, ...] = field(compare=False, repr=False)


@dataclass(frozen=True)
class KernelSignature:
    """The checker's verdict material for one compiled kernel."""

    isa: str  # "ptx" | "amdgcn"
    entry: str
    digest: str
    outputs: tuple[OutputSignature, ...]
    physical: bool  # some root depends on which thread stored it
    deterministic: bool  # False when float atomics or clocks make the bytes run-dependent
    fallback: str | None  # why the walk gave up (then digest is the text's)
    ntid: tuple[int, int, int] | None = None
    effects: tuple[Node, ...] = field(default=(), compare=False, repr=False)


def _h(*parts: bytes | str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"|")
    return h.hexdigest()


def build(
    isa: str,
    entry: str,
    roots: list[Root],
    effects: list[Node],
    ntid: tuple[int, int, int] | None,
    param_syms: set[str],
    deterministic: bool,
) -> KernelSignature:
    from fixbits.checker.balanced import Collapser

    by_param: dict[str, list[tuple[bytes, Root]]] = {}
    physical = False
    col = Collapser()
    rel_memos: dict[tuple, dict[bytes, Node]] = {}
    for r in roots:
        addr = r.address
        r = Root(r.param, r.nbytes, addr, col.collapse(r.value), r.relative)
        rel = (
            relativize(addr.poly, r.value, param_syms, rel_memos)
            if addr.poly is not None and not r.relative
            else None
        )
        if r.relative and not r.value.variant:
            root = r  # already in the output's own coordinates (a TMA tile of one tree)
        elif rel is not None:
            a2, v2 = rel
            root = Root(r.param, r.nbytes, int_node(a2), v2, True)
        else:
            physical = True
            root = r
        key = Node("root", (root.nbytes,), (root.address, root.value)).digest
        by_param.setdefault(r.param, []).append((key, root))
    outs = []
    for param in sorted(by_param):
        # program order, each distinct root kept at its last occurrence: a later store to the
        # same place wins, so the order of distinct stores is kept; repeats of one tree (a
        # thread storing several elements of one relative form) count once
        seq = by_param[param]
        last = {k: i for i, (k, _) in enumerate(seq)}
        kept = [(k, rt) for i, (k, rt) in enumerate(seq) if last[k] == i]
        outs.append(OutputSignature(param, _h(*(k for k, _ in kept)), tuple(rt for _, rt in kept)))
    eff = [e.digest for e in effects]  # program order: effects on shared state do not commute
    parts = [isa, "det" if deterministic else "nondet"]
    if physical:
        parts.append(f"ntid={ntid}")
    digest = _h(*parts, *(o.param + o.digest for o in outs), *eff)
    return KernelSignature(
        isa, entry, digest, tuple(outs), physical, deterministic, None, ntid, tuple(effects)
    )


_WS = re.compile(r"\s+")


def text_fallback(isa: str, entry: str, text: str, reason: str) -> KernelSignature:
    """Signature of a kernel the walk cannot model: its text without comments or spacing."""
    if isa == "ptx":
        body = text.split(".section", 1)[0]
        body = re.sub(r"//[^\n]*|/\*.*?\*/|^\s*\.(loc|file)\b[^\n]*$", "", body, flags=re.S | re.M)
    else:
        body = text.split(".section\t.debug", 1)[0]
        body = re.sub(r";[^\n]*$|^\s*\.(loc|file)\b[^\n]*$", "", body, flags=re.M)
    body = _WS.sub(" ", body).strip()
    return KernelSignature(isa, entry, _h("text", isa, body), (), True, True, reason, None)
