"""What a tensor-core K loop multiplies, as far as the configs of one kernel agree on it.

The K-loop exemption (walk.LoopSummary.out) summarises an accumulator fed by a chain of identical
MMAs as ``mmafold``: the chain's instruction and the seed, not the operands. Left at that, two
kernels whose loops multiply different things sign alike: ``tl.dot(x * 2, y)`` and ``tl.dot(x, y)``,
a B tile read from another pointer or 8 columns on, a loop over every other K tile. The operand
key added here holds what every config of one source shares and a different source need not:
- the arithmetic between the global loads and the MMA (scalings, conversions) and which pointer
  parameters the loads start from;
- the values the loop's shared-memory staging holds, abstracted the same way, in the order the
  kernel first stages them (Triton stages a dot's operands in source load order: ``A @ B`` against
  ``B @ A``), and which staged tile each wgmma operand reads (``swapped``);
- where each pointer's tiles start and how far they move per MMA (``addresses``), and what the
  loop's exit test compares the K index with (``bound``).
Other address terms, vector widths, staging depth and layout, how a tile is staged (copy engine
or load and store) and what a masked load fills in are left out: they are what the configs differ
in. So the key is a necessary condition only: the exemption still trusts that each accumulator
register holds the element its store writes, and a loop whose bound is computed with BLOCK_K is
taken to walk all of K (walk.py's module docstring).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from fractions import Fraction

from fixbits.checker.forms import Poly
from fixbits.checker.node import Node

# shared-memory places and reads: their contents are keyed through the staged values instead
_SMEM_KINDS = frozenset({"xwarp", "ldmatrix", "smemref", "sread", "hist", "st", "lane_sym", "lanex"})
_LOOP_KINDS = frozenset({"carried", "loop", "inloop", "loopout", "mmafold", "slot"})
_SMEM = Node("smem", (), ())
_LOOP = Node("loopstate", (), ())


def _base_pointers(p: Poly) -> tuple[str, ...]:
    """The parameters an address form starts from: its degree-one terms ``1 * p:i``."""
    return tuple(sorted(m[0] for m, c in p.terms.items() if c == 1 and len(m) == 1 and m[0].startswith("p:")))


def _abstract(n: Node, memo: dict[bytes, Node]) -> Node:
    got = memo.get(n.digest)
    if got is not None:
        return got
    if n.poly is not None:
        out = Node("ptrs", _base_pointers(n.poly), ())
    elif n.kind in _SMEM_KINDS:
        out = _SMEM
    elif n.kind in _LOOP_KINDS:
        out = _LOOP
    elif n.kind == "load":
        out = Node("gload", (n.attrs[0] if n.attrs else "",), tuple(_abstract(k, memo) for k in n.kids))
    elif n.kind in ("cpasync", "masked") and n.kids:
        # an asynchronous copy holds what it loaded, a predicated load what it loaded where it
        # loads: which of the two stages a tile, and its fill, differ between configs
        out = _abstract(n.kids[0], memo)
    elif n.kind == "pack":
        kids = {k.digest: k for k in (_abstract(x, memo) for x in n.kids)}
        out = kids.popitem()[1] if len(kids) == 1 else Node("pack", (), tuple(kids[d] for d in sorted(kids)))
    else:
        out = Node(n.kind, n.attrs, tuple(_abstract(k, memo) for k in n.kids))
    memo[n.digest] = out
    return out


def _param_part(p: Poly, bases: tuple[str, ...]) -> Poly:
    """The address at thread, block and iteration zero, less its base pointer: the terms over
    parameters only (a term with any other symbol, coordinate or opaque token, is dropped)."""
    return Poly._of(
        {
            m: c
            for m, c in p.terms.items()
            if all(s.startswith("p:") for s in m) and not (c == 1 and len(m) == 1 and m[0] in bases)
        }
    )


def _below(a: Poly, b: Poly) -> bool:
    """``a <= b`` term by term (a strictly smaller address for every non-negative parameter)."""
    return all(a.terms.get(m, 0) <= b.terms.get(m, 0) for m in a.terms.keys() | b.terms.keys())


def _advance(p: Poly, it: str, steps: int) -> str | None:
    """How far an address moves per MMA of the chain: its terms in the loop's iteration symbol
    ``it`` (degree one), divided by the MMAs one iteration chains (``steps``)."""
    d = {tuple(x for x in m if x != it): Fraction(c, steps) for m, c in p.terms.items() if m.count(it) == 1}
    return " + ".join(f"{c}*{'*'.join(m)}" if m else f"{c}" for m, c in sorted(d.items())) if d else None


def load_addresses(nodes: Iterable[Node]) -> dict[tuple[str, ...], set[Poly]]:
    """Per base pointer, the address forms of the global loads under ``nodes`` (shared memory and
    loop state are not entered: their contents are keyed through the staged values)."""
    per: dict[tuple[str, ...], set[Poly]] = {}
    seen: set[bytes] = set()
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if n.digest in seen or n.kind in _SMEM_KINDS or n.kind in _LOOP_KINDS:
            continue
        seen.add(n.digest)
        if n.kind == "load":
            for k in n.kids:
                if k.poly is not None and (bases := _base_pointers(k.poly)):
                    per.setdefault(bases, set()).add(k.poly)
        todo.extend(n.kids)
    return per


def addresses(loads: dict[tuple[str, ...], set[Poly]], it: str, steps: int) -> tuple[str, ...]:
    """Per base pointer of ``loads`` (load_addresses), where the tiles read from it start and
    how far they move per K step.

    The start is the least of its global loads' addresses at thread, block and iteration zero.
    Triton's layouts are linear, so thread 0's first register holds a tile's element (0, 0) in
    every config, and the other registers, threads, blocks and prefetched iterations only add
    non-negative terms; a B tile read 8 columns on starts 16 bytes on. Where no single least
    address exists, every minimal one is kept. The move is the address's step per iteration of
    loop ``it`` over the ``steps`` MMAs an iteration chains: BLOCK_K cancels (a wider tile moves
    further and chains more MMAs), so a loop that skips every other tile moves twice as far."""
    out = []
    for bases, forms in loads.items():
        starts = list({_param_part(f, bases): None for f in forms})
        moves = sorted({a for f in forms if (a := _advance(f, it, steps)) is not None})
        out.append(",".join(bases) + "@" + "|".join(_least(starts)) + "+" + "|".join(moves))
    return tuple(sorted(out))


def _least(offs: list[Poly]) -> list[str]:
    """The minimal elements of ``offs`` under ``_below``, as text. Usually one is below all the
    others: then it is one of least coefficient sum (``_below`` keeps sums in order), so one
    pass settles it; the pairwise scan is kept for the rest."""
    first = min(offs, key=lambda a: (sum(a.terms.values()), str(a)))
    if all(_below(first, b) for b in offs):
        return [str(first)]
    return sorted(str(a) for a in offs if not any(b != a and _below(b, a) for b in offs))


def bound(cond: Node, it: str, chain: tuple, steps: int) -> str:
    """What the loop's exit test compares the K index with, as far as configs agree on it: the
    terms of ``cmp(x, y)``'s ``x - y`` over parameters only, less its constant (which holds the
    step) and its terms in ``it``; ``opaque`` where a term holds any other symbol (a bound
    computed with BLOCK_K, such as ``cdiv(K, BLOCK_K)``, is one).

    Where the bound is read, the test's step per iteration is in K elements; a step other than
    the K elements the ``steps`` MMAs of ``chain`` (walk._mma_chain: its instruction's K is
    ``chain[1]``, ``"k16"``) take in one iteration (a loop that skips tiles, split-K's stride over
    SPLIT_K tiles) makes which elements a K chunk holds depend on the chunk, so the chunk joins
    the key (as a k-group's does)."""
    k = chain[1] if len(chain) > 1 and isinstance(chain[1], str) else ""
    per_iteration = steps * int(k[1:]) if k[:1] == "k" and k[1:].isdigit() else None
    if cond.kind != "cmp" or len(cond.kids) != 2 or any(k.poly is None for k in cond.kids):
        return "opaque"
    x = cond.kids[0].poly - cond.kids[1].poly  # type: ignore[operator]
    rest = {m: c for m, c in x.terms.items() if m and it not in m}
    if not all(y.startswith("p:") for m in rest for y in m):
        return "opaque"
    out = f"{cond.attrs}:" + str(Poly._of(rest))
    step = abs(x.terms.get((it,), 0))
    if per_iteration and step and step != per_iteration:
        out += f" step {Fraction(step, per_iteration)} of chunk {per_iteration}"
    return out


def staged_order(staged: Iterable[Node], memo: dict[bytes, Node]) -> tuple[bytes, ...]:
    """The abstracted staged values, each once, in the order the kernel first stages them."""
    order: dict[bytes, None] = {}
    for n in staged:
        order.setdefault(_abstract(n, memo).digest, None)
    return tuple(order)


def _tile_at(op: Node, dtoks: dict[str, Node]) -> int | None:
    """The shared-memory offset (the address's constant) of the tile a wgmma descriptor operand
    points at: the descriptor is a ``D:`` token for ``bfe`` or ``shr`` of that address, or for an
    ``and`` mask of such a token plus a warp group's offset (a tile's k steps and the warp
    groups' parts add to the descriptor, not to the address), where the walk recorded it."""
    if op.kind != "smemref" or not op.kids:
        return None
    p = op.kids[0].poly
    for _ in range(4):
        toks = [x for x in p.symbols() if x.startswith("D:")] if p is not None else []
        t = dtoks.get(toks[0]) if len(toks) == 1 else None
        if t is None or t.kind != "dtok" or not t.kids or t.kids[0].poly is None:
            return None
        if str(t.attrs[0]).startswith(("bfe", "shr")):
            return t.kids[0].poly.terms.get((), 0)
        if not str(t.attrs[0]).startswith("and"):
            return None
        p = t.kids[0].poly
    return None


def tile_owners(
    staged: tuple[Node, ...], staged_at: tuple[Node, ...], order: tuple[bytes, ...], memo: dict[bytes, Node]
) -> dict[int, set[int]]:
    """Shared-memory offset (a store address's constant) -> the positions in staging ``order``
    (staged_order) of the values stored there; the stores' other terms are threads and the stage."""
    pos = {d: i for i, d in enumerate(order)}
    at: dict[int, set[int]] = {}
    for a, v in zip(staged_at, staged, strict=False):
        if a.poly is not None:
            at.setdefault(a.poly.terms.get((), 0), set()).add(pos[_abstract(v, memo).digest])
    return at


def swapped(
    ops: Iterable[tuple[Node, Node]], owners: dict[int, set[int]], dtoks: dict[str, Node]
) -> tuple[tuple[int, int], ...]:
    """The MMAs whose A tile was staged after their B tile, as (A's, B's) positions in staging
    order: each descriptor's tile is the one staged value its offset ``owners`` (tile_owners)
    holds. Only a proven swap is kept, so a loop whose descriptors are not read (register
    operands, ``ldmatrix``) keys as one multiplied in staging order; ``A @ B`` keeps its digest and
    the tiles of A and B loaded in that order and multiplied ``B @ A`` part from it."""
    out: set[tuple[int, int]] = set()
    for x, y in ops:
        cx, cy = _tile_at(x, dtoks), _tile_at(y, dtoks)
        ix = owners.get(cx, set()) if cx is not None else set()
        iy = owners.get(cy, set()) if cy is not None else set()
        if len(ix) == 1 and len(iy) == 1 and min(ix) > min(iy):
            out.add((min(ix), min(iy)))
    return tuple(sorted(out))


def operand_key(
    operands: Iterable[Node],
    staged: tuple[bytes, ...],
    walks: tuple[str, ...],
    memo: dict[bytes, Node],
    swaps: tuple[tuple[int, int], ...] = (),
) -> str:
    """A digest of the set of abstracted MMA operands, of the staged values (staged_order) and of
    how the loop walks K (``walks``: addresses and bound) and of the operands multiplied against
    staging order (``swaps``, from ``swapped``); ``memo``: abstractions kept between the chains of
    one loop."""
    h = hashlib.blake2b(digest_size=8)
    for d in sorted({_abstract(n, memo).digest for n in operands}):
        h.update(d)
    for d in staged:
        h.update(b"staged:" + d)
    for w in walks:
        h.update(b"walk:" + w.encode())
    for i, j in swaps:
        h.update(f"swap:{i},{j}".encode())
    return h.hexdigest()
