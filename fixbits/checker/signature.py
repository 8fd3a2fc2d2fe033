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
from typing import TYPE_CHECKING

from fixbits.checker import dtokens, exp_pads
from fixbits.checker.coord_split import split_bits
from fixbits.checker.forms import Poly
from fixbits.checker.node import Node, Root, int_node
from fixbits.checker.walk import relative_addresses, relativize, relativize_meets, tree_digests

if TYPE_CHECKING:
    from fixbits.checker.balanced import Collapser
    from fixbits.checker.thread_roots import ThreadEval


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
    shared_reads: bool = False,
    pads: bool = False,
    masked_false: dict[bytes, int] | None = None,
    masked_preds: dict[bytes, Node | None] | None = None,
    tokens: dict[str, Node] | None = None,
) -> KernelSignature:
    """``shared_reads``: the walk found no shared read a later store of its barrier interval may
    race with, and none inside a loop (Walk.smem_war): per-thread roots may then take shared
    reads apart (thread_roots.read_at). ``pads``: a launch-specialised walk, whose +0 padding
    the balanced collapse reads as zero spans (balanced.py); ``masked_false``: its threads
    where a masked load keeps the register's padding (maxsets.py); ``masked_preds``: each masked
    load's predicate (balanced.py lifts plain loads to masked ones where it holds); ``tokens``:
    what the walk's D: tokens of float bits stand for (dtokens.py)."""
    from fixbits.checker.balanced import Collapser
    from fixbits.checker.thread_roots import ThreadEval, thread_bits

    nbits = thread_bits(ntid)
    col = Collapser(pads, masked_false, nbits, masked_preds)
    rel_memos: dict[tuple, dict[bytes, Node]] = {}
    tev = ThreadEval(nbits, shared_reads, pads, col) if nbits is not None else None
    tev_full: ThreadEval | None = None

    def full() -> ThreadEval:
        """The thread reading that takes one writer's reads apart (ThreadEval.one_writer),
        made once a root needs it."""
        nonlocal tev_full
        if tev_full is None:
            assert nbits is not None
            tev_full = ThreadEval(nbits, shared_reads, pads, col, one_writer=True)
        return tev_full

    expander = dtokens.Expander(tokens) if tokens else None
    canon_memo: dict[bytes, Node] = {}
    ready: list[Root] = []
    for r in roots:
        if expander is not None:
            r = Root(r.param, r.nbytes, r.address, expander.expand(r.value), r.relative, r.storers)
        v = col.collapse(r.value)
        if pads:
            v = exp_pads.fold(r.value, v, col, r.storers)  # (a softmax's exp(-inf - max) padding as +0)
        ready.append(Root(r.param, r.nbytes, r.address, v, r.relative))

    def resolve(r: Root, at: int | None) -> list[Root] | None:
        """The relative roots ``r`` signs as when the plain rewrite leaves it variant: every
        thread's store as one and the same relative tree (a block's rows picked by thread bits
        meet one row per block, thread_roots.py), read a second time with one writer's shared
        stores taken apart where the first reading does not meet; else, launch-specialised,
        its exchanges that are one tree at every thread as that tree; else the byte offset
        split into block and thread parts (coord_split.py, at bit ``at``). None: physical."""
        addr = r.address.poly
        assert addr is not None
        per = per_thread(r, nbits, tev, param_syms, rel_memos, col, at) if tev is not None else None
        if per is None and tev is not None and tev.shared_reads and r.value.exchange:
            per = per_thread(r, nbits, full(), param_syms, rel_memos, col, at)
        if per is not None:
            return per
        rel = None
        if tev is not None and tev.pads and r.value.exchange:
            # (launch-specialised walks only: unspecialised, no class of the corpus merged by
            # it, and it cost a quarter of the speed)
            u = uniform_exchanges(r, nbits, tev, col)
            if u is not None:
                rel = relativize(addr, u, param_syms, rel_memos, split_at=at)
        if rel is None:
            rel = relativize(addr, r.value, param_syms, rel_memos, split=True, split_at=at)
        return None if rel is None else [Root(r.param, r.nbytes, int_node(rel[0]), rel[1], True)]

    # each root by the plain rewrite where it is exact; the others per output, at the split bit
    # chosen for the output (split_bits). Each rewrite is exact, and the choice is a function of
    # the roots, so equal roots choose alike.
    signed: list[list[Root] | None] = []
    harder: dict[str, list[int]] = {}
    for r in ready:
        if r.relative and not r.value.variant:
            signed.append([r])  # a TMA tile of one tree
            continue
        if r.address.poly is None or r.relative:
            signed.append(None)
            continue
        rel = relativize(r.address.poly, r.value, param_syms, rel_memos, split=False)
        if rel is not None:
            signed.append([Root(r.param, r.nbytes, int_node(rel[0]), rel[1], True)])
            continue
        harder.setdefault(r.param, []).append(len(signed))
        signed.append(None)
    if harder:
        bits = split_bits(ready, param_syms)
        for param, idxs in harder.items():
            best: tuple[tuple[int, int], list[list[Root] | None]] | None = None
            for at in bits.get(param, (None,)):
                got = [resolve(ready[i], at) for i in idxs]
                score = (sum(g is None for g in got), len({_root_key(x) for g in got if g for x in g}))
                if best is None or score < best[0]:
                    best = (score, got)
                if score[0] == 0 and score[1] <= 1:
                    break  # (nothing signs these roots with fewer distinct trees)
            assert best is not None
            for i, g in zip(idxs, best[1], strict=True):
                signed[i] = g

    by_param: dict[str, list[tuple[bytes, Root]]] = {}
    physical = False
    for r, got in zip(ready, signed, strict=True):
        if got is None:
            physical = True
            got = [r]
        for root in got:
            if expander is not None:
                root = Root(root.param, root.nbytes, root.address, dtokens.canonical(root.value, canon_memo),
                            root.relative, root.storers)  # fmt: skip
            by_param.setdefault(r.param, []).append((_root_key(root), root))
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


def _root_key(root: Root) -> bytes:
    return Node("root", (root.nbytes,), (root.address, root.value)).digest


def per_thread(
    r: Root,
    nbits: int | None,
    tev: object,
    param_syms: set[str],
    memos: dict[tuple, dict[bytes, Node]],
    col: Collapser,
    split_at: int | None = None,
) -> list[Root] | None:
    """The root as one relative root that every thread's store meets (thread_roots.py); None
    when some thread's store is not relative or two threads' stores differ as relative trees
    (checked thread by thread, so an expansion that cannot pay off stops early)."""
    from fixbits.checker.thread_roots import ThreadEval

    assert isinstance(tev, ThreadEval) and nbits is not None
    if r.address.poly is None:
        return None
    threads = _threads(r, nbits, tev)
    # the first two threads' addresses before any tree (cheap): threads whose stores can have
    # no relative address in common store different relative roots, so their trees need not
    # be built to say so (any None here is the None the loop below would reach)
    common: set[tuple] | None = None
    for t in threads[:2]:
        a = tev.poly_at(r.address.poly, t)
        if a is None:
            return None
        got = relative_addresses(a, param_syms, split_at)
        common = got if common is None else common & got
        if not common:
            return None
    first: tuple[Poly, Node] | None = None
    nodes: set[bytes] | None = None
    for t in threads:
        a = tev.poly_at(r.address.poly, t)
        v = tev.at(r.value, t)
        if a is None or v is None:
            return None
        if tev.pads:
            v = col.collapse(v)  # (reads resolved to +0 pads may leave a padded balanced tree)
        if first is None:
            first = relativize(a, v, param_syms, memos, split_at=split_at)
            if first is None:
                return None
            continue
        # every other thread must store the first one's relative root (same address and tree):
        # relativize_meets answers that as relativize would, and stops at the first node of
        # this thread's tree that the first one's does not hold
        if nodes is None:
            nodes = tree_digests(first[1])
        if not relativize_meets(a, v, param_syms, memos, first, nodes, split_at):
            return None
    if first is None:
        return None
    return [Root(r.param, r.nbytes, int_node(first[0]), first[1], True)]


def uniform_exchanges(r: Root, nbits: int | None, tev: ThreadEval, col: Collapser) -> Node | None:
    """The root's tree with each exchange (a shuffle, a cross-warp read) whose subtree is one and
    the same tree at every thread replaced by that tree (a row's max or total that every lane
    reads), collapsed again; None when an exchange is left. Exact: the subtree's value at each
    thread is ThreadEval's reading of it there, and they agree. Unlike per_thread the rest of
    the tree keeps its thread bits, so a thread's own element stays a form of its lane (a row
    stride kept as a parameter leaves per_thread's threads one constant column apart)."""
    if nbits is None or r.address.poly is None:
        return None
    threads = _threads(r, nbits, tev)
    memo: dict[bytes, Node] = {}

    def one(n: Node) -> Node:
        if not n.exchange:
            return n
        got = memo.get(n.digest)
        if got is not None:
            return got
        first: Node | None = None
        for t in threads:
            x = tev.at(n, t)
            if x is None:
                first = None
                break
            if tev.pads:
                x = col.collapse(x)
            if first is None:
                first = x
            elif x.digest != first.digest:
                first = None
                break
        if first is not None and not first.exchange:
            out = first
        else:
            kids = tuple(one(k) for k in n.kids)
            same = all(a is b for a, b in zip(kids, n.kids, strict=True))
            out = n if same else Node(n.kind, n.attrs, kids)
        memo[n.digest] = out
        return out

    v = one(r.value)
    if v.exchange:
        return None
    return col.collapse(v)


def _threads(r: Root, nbits: int, tev: object) -> list[int] | range:
    """The threads whose stores per_thread must read: one per assignment of the thread bits the
    root's address and value may depend on (ThreadEval.bits_used), the others 0; every thread
    when that is not known. A thread's address and value are functions of those bits alone
    (ThreadEval.at substitutes only them), so the others repeat one of these pairs."""
    from fixbits.checker.forms import is_bit_symbol
    from fixbits.checker.thread_roots import ThreadEval

    assert isinstance(tev, ThreadEval) and r.address.poly is not None
    used = tev.bits_used(r.value)
    if used is None:
        return range(1 << nbits)
    bits = set(used)
    for s in r.address.poly.symbols():
        if is_bit_symbol(s):
            if not tev._own_bit(s):
                return range(1 << nbits)
            bits.add(int(s[2:]))
    # thread m of the list has bit k of m at position pos[k]: each bit doubles the list
    out = [0]
    for p in sorted(bits):
        out += [t | 1 << p for t in out]
    return out
