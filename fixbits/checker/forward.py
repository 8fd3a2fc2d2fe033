"""Exact thread-bit arithmetic and store-to-load forwarding through shared memory (session 5).

Two pieces, both proofs by enumeration over the block's thread ids (a launch bound of 2^n
threads in x makes ``%tid.x`` the n bits ``tx0 .. tx{n-1}``):

* ``bit_op``: an integer operation (xor, and, or, bfe) whose operands are functions of thread
  bits only is evaluated on every assignment of those bits; the result is the unique multilinear
  polynomial through those values (Moebius transform). This is exact where the walk used to
  make an opaque token of an xor swizzle.

* forwarding (``PTXWalk.forward_ldmatrix`` / ``forward_ld``, helpers here): a shared-memory
  read (``ldmatrix`` .m8n8 .b16, not transposed, or ``ld.shared``) after a block-wide barrier is
  replaced by the value the one writer of its slot stored (``stmatrix`` is modelled as the
  4-byte stores it makes), with the writer's thread bits expressed in the reader's. Sound
  only when every condition below holds (any doubt: no forwarding, the read stays an exchange
  node over the whole history):
  - the read is outside loops, unpredicated, on no branch;
  - the stores of the latest barrier generation ("G": after the last-but-one block-wide barrier,
    before the last one) are plain value stores outside loops, each predicate decided per
    thread; no store since the last barrier; every copy-engine write issued before G was
    waited for (``cp.async.wait_group 0`` / ``wait_all``) before G's barrier; no unmodelled
    shared-memory write anywhere; one shared-memory window in the module;
  - every byte the block reads is written by exactly one (store, thread) of G, the four bytes of
    a read by one 4-byte store: G is then the latest write of every slot read, and what came
    before (operand staging, whatever the pipeline depth) cannot be seen;
  - the stored trees use only nodes with explicit, thread-relative semantics (no exchanges, no
    opaque tokens, no loop state) so that renaming thread bits in them is their value at the
    writer; int leaves are interpolated over the reader's bits exactly;
  - no shared store follows a forwarded read before the next barrier (checked at the end of the
    walk: ``Unsupported`` otherwise).
"""

from __future__ import annotations

import hashlib

import numpy as np

from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.node import COMMUTATIVE, COMMUTATIVE_PREFIX2, Node, int_node
from fixbits.checker.pads import const_of, is_bit_move

MAX_BITS = 10

# node kinds whose meaning at a thread is a function of their children alone
_RENAMABLE = frozenset({
    "add", "sub", "mul", "fma", "max", "min", "neg", "abs", "fabs", "cvt", "pack", "slice", "masked",
    "select", "cmp", "and", "not", "or", "load", "mmafold", "true", "ex2", "lg2", "sqrt", "rsqrt",
    "rcp", "div", "const", "bits", "relu", "f",
})  # fmt: skip
INVARIANT_PREFIXES = ("p:", "ctaid.", "nctaid.", "Ti:")  # the same in every thread of a block

# opaque "Tv:" tokens made of block-level inputs only (block coordinates, parameters): the same
# in every thread of one block, so a writer's token is the reader's. Names are digests of the
# expression, so the set is valid across files.
_BLOCK_TOKENS: set[str] = set()


def block_level(p: Poly) -> bool:
    """True when ``p`` has one value in every thread of a block (no thread bit, data or state)."""
    return all(s.startswith(INVARIANT_PREFIXES) or s in _BLOCK_TOKENS for s in p.symbols())


def note_block_token(p: Poly) -> None:
    if len(_BLOCK_TOKENS) > 200_000:
        _BLOCK_TOKENS.clear()
    for s in p.symbols():
        _BLOCK_TOKENS.add(s)


def _eval(p: Poly, env: dict[str, int]) -> int:
    tot = 0
    for m, c in p.terms.items():
        v = c
        for s in m:
            v *= env[s]
            if not v:
                break
        tot += v
    return tot


_EVAL_ALL: dict[tuple, list[int]] = {}


def eval_all(p: Poly, n: int) -> list[int]:
    """``p`` (a form over tx0 .. tx{n-1} only) at every thread id of a block of 2^n threads."""
    key = (p.key(), n)
    got = _EVAL_ALL.get(key)
    if got is None:
        size = 1 << n
        out = [0] * size
        for m, c in p.terms.items():
            mask = 0
            for s in m:
                mask |= 1 << int(s[2:])
            for t in range(size):
                if t & mask == mask:
                    out[t] += c
        if len(_EVAL_ALL) > 50_000:
            _EVAL_ALL.clear()
        got = _EVAL_ALL[key] = out
    return got


def _bitsyms(polys: list[Poly]) -> list[str] | None:
    syms: set[str] = set()
    for p in polys:
        for s in p.symbols():
            if not is_bit_symbol(s):
                return None
            syms.add(s)
    if len(syms) > MAX_BITS:
        return None
    return sorted(syms)


def moebius(syms: list[str], vals: list[Poly]) -> Poly:
    """The multilinear polynomial over ``syms`` that takes vals[x] at assignment x (bit i of x is
    syms[i]); the values may themselves be polynomials in other symbols (transformed one
    monomial at a time)."""
    size = len(vals)
    cols: dict[tuple[str, ...], list[int]] = {}
    for x, v in enumerate(vals):
        for m, c in v.terms.items():
            col = cols.get(m)
            if col is None:
                col = cols[m] = [0] * size
            col[x] = c
    return moebius_cols(syms, cols)


def moebius_cols(syms: list[str], cols: dict[tuple[str, ...], list[int]]) -> Poly:
    """``moebius`` from the values already split by monomial of the other symbols: cols[m][x]
    is the coefficient of m at assignment x (the lists are consumed)."""
    n = len(syms)
    full = 1 << n
    out: dict[tuple[str, ...], int] = {}
    for m, f in cols.items():
        size = len(f)
        if size == full and n:
            # the usual case, an affine function of the bits: its form, checked at every point
            # (the prediction is built by doubling: pred[x] = f[0] + sum of d[i] over x's bits)
            f0 = f[0]
            d = [f[1 << i] - f0 for i in range(n)]
            if any(d):
                pred = [f0]
                for di in d:
                    pred += [v + di for v in pred]
                ok = pred == f
            else:
                ok = f.count(f0) == size
            if ok:
                if f0:
                    k = tuple(sorted(m))
                    out[k] = out.get(k, 0) + f0
                for i, c in enumerate(d):
                    if c:
                        k = tuple(sorted(m + (syms[i],)))
                        out[k] = out.get(k, 0) + c
                continue
            # the Moebius transform in place, one bit at a time over whole blocks: the lower
            # half of a block is not changed by its bit's pass
            for i in range(n):
                b = 1 << i
                for lo in range(0, size, b << 1):
                    hi = lo + b
                    f[hi : hi + b] = [u - v for u, v in zip(f[hi : hi + b], f[lo:hi], strict=True)]
        else:
            for i in range(n):
                b = 1 << i
                for x in range(size):
                    if x & b:
                        f[x] -= f[x ^ b]
        for x, c in enumerate(f):
            if c:
                k = tuple(sorted(m + tuple(syms[i] for i in range(n) if x >> i & 1)))
                out[k] = out.get(k, 0) + c
    return Poly(out)


def _bit_terms(p: Poly, fixed: dict[str, int]) -> list[tuple[tuple[str, ...], int, int]]:
    """``p``'s terms as (monomial of the symbols not in ``fixed``, mask of the fixed bits it
    multiplies, coefficient): p at a thread t is the sum of the terms whose mask is set in t."""
    out = []
    for m, c in p.terms.items():
        mask = 0
        rest = []
        for s in m:
            i = fixed.get(s)
            if i is None:
                rest.append(s)
            else:
                mask |= 1 << i
        out.append((tuple(rest), mask, c))
    return out


def _partial(p: Poly, env: dict[str, int]) -> Poly:
    """``p`` with the thread bits of ``env`` fixed (other symbols kept)."""
    out: dict[tuple[str, ...], int] = {}
    for m, c in p.terms.items():
        rest = []
        for s in m:
            v = env.get(s)
            if v is None:
                rest.append(s)
            elif not v:
                c = 0
                break
        if c:
            k = tuple(rest)
            out[k] = out.get(k, 0) + c
    return Poly(out)


def _eval_on(p: Poly, syms: list[str]) -> list[int]:
    """``p`` (a form over ``syms`` only) at every assignment (bit i of the index is syms[i])."""
    pos = {s: i for i, s in enumerate(syms)}
    size = 1 << len(syms)
    out = [0] * size
    for m, c in p.terms.items():
        mask = 0
        for s in m:
            mask |= 1 << pos[s]
        if not mask:
            out = [v + c for v in out]
            continue
        for t in range(size):
            if t & mask == mask:
                out[t] += c
    return out


_BIT_OPS: dict[tuple, Poly | None] = {}


def bit_op(op: str, args: list[Poly], signed: bool = False) -> Poly | None:
    """xor / and / or (any sign, result in [0, 2^31)) or bfe (u: operand non-negative; s: sign
    extension) of functions of thread bits, exactly; None when out of scope. Memoised on the
    operation and the operands' keys, all it depends on (a loop body's two passes and the
    configs of one kernel repeat the same swizzles)."""
    key = (op, signed, tuple([p.key() for p in args]))
    if key in _BIT_OPS:
        return _BIT_OPS[key]
    res = _bit_op(op, args, signed)
    if len(_BIT_OPS) > 50_000:
        _BIT_OPS.clear()
    _BIT_OPS[key] = res
    return res


def _bit_op(op: str, args: list[Poly], signed: bool) -> Poly | None:
    syms = _bitsyms(args)
    if syms is None or not syms:
        return None
    cols = [_eval_on(p, syms) for p in args]
    vals = []
    for a in zip(*cols, strict=True):
        if op in ("xor", "and", "or"):
            r = a[0]
            for v in a[1:]:
                r = r ^ v if op == "xor" else (r & v if op == "and" else r | v)
            if not 0 <= r < 1 << 31:
                return None
        elif op == "bfe":
            v, pos, ln = a
            if not (0 <= v < 1 << 31 and 0 <= pos < 32 and 0 < ln <= 32):
                return None
            r = (v >> pos) & ((1 << ln) - 1)
            if signed and r >> (ln - 1) & 1:
                r -= 1 << ln
        else:
            return None
        vals.append(r)
    # (what moebius makes of the constants: one column, the constant monomial's)
    return moebius_cols(syms, {(): vals} if any(vals) else {})


# ---- forwarding ------------------------------------------------------------------------------


_TRUTH_ALL: dict[tuple[bytes, int], list[bool] | None] = {}


def truth_all(pred: Node, n: int) -> list[bool] | None:
    """``truth`` at every thread id of a block of 2^n threads, or None when it is not decided
    at some thread (cached per predicate)."""
    key = (pred.digest, n)
    if key in _TRUTH_ALL:
        return _TRUTH_ALL[key]
    size = 1 << n
    res: list[bool] | None = None
    if pred.kind == "true":
        res = [True] * size
    elif pred.kind == "not":
        t = truth_all(pred.kids[0], n)
        res = None if t is None else [not v for v in t]
    elif pred.kind in ("and", "or"):
        ts = [truth_all(k, n) for k in pred.kids]
        if all(t is not None for t in ts):
            f = all if pred.kind == "and" else any
            res = [f(t[x] for t in ts) for x in range(size)]  # type: ignore[index]
    elif pred.kind == "cmp" and len(pred.kids) == 2 and pred.attrs[1] in ("s", "u"):
        a, b = pred.kids
        ok = a.poly is not None and b.poly is not None and b.poly.is_const() and b.poly.const_value() == 0
        if ok and all(is_bit_symbol(s) and int(s[2:]) < n and s[:2] == "tx" for s in a.poly.symbols()):  # type: ignore[union-attr]
            vals = eval_all(a.poly, n)  # type: ignore[arg-type]
            if pred.attrs[0] == "le":
                res = [v <= 0 for v in vals]
            elif pred.attrs[0] == "eq":
                res = [v == 0 for v in vals]
    if len(_TRUTH_ALL) > 50_000:
        _TRUTH_ALL.clear()
    _TRUTH_ALL[key] = res
    return res


def renamable(n: Node, memo: dict[bytes, bool], shfl: bool = False) -> bool:
    """True when ``n`` means the same at any thread once its thread bits are renamed.
    ``shfl``: a full-warp butterfly counts too (its operand at lane ^ b: _interp_shfl,
    concretize); a memo holds for one value of the flag."""
    got = memo.get(n.digest)
    if got is not None:
        return got
    if n.poly is not None:
        res = all(
            is_bit_symbol(s) or s.startswith(INVARIANT_PREFIXES) or s in _BLOCK_TOKENS or s == "smem"
            for s in n.poly.symbols()
        )
    elif n.kind == "load":
        res = n.attrs[0] == "global" and all(renamable(k, memo, shfl) for k in n.kids)
    elif n.kind == "shfl":
        res = shfl and is_bit_move(n) and renamable(n.kids[0], memo, shfl)
    elif n.kind == "xwarp":
        # a shared read means the bytes at its address after the block's stores: its history's
        # thread bits are the writers' (bound), only the address is the reader's
        res = renamable(n.kids[0], memo, shfl)
    elif n.kind in _RENAMABLE or (n.kind not in ("undef",) and not n.kids and n.kind in ("f", "const")):
        res = all(renamable(k, memo, shfl) for k in n.kids)
    else:
        res = False
    memo[n.digest] = res
    return res


def interpolate(trees: list[Node], tids: list[int], rsyms: list[str], memo: dict) -> Node | None:
    """One tree over the reader's bits: trees[x] (a writer's tree, its bits fixed to the writer
    thread tids[x]; -1: a tree with no writer bits left) at
    reader assignment x. The trees must agree except in int leaves, which are interpolated
    (commutative operands are lined up by shape first: any order is the same value).

    ``memo``: int-leaf interpolations kept between calls (one walk's reads), keyed on all that
    one reads: the leaves, the reader -> leaf map, the writers and the reader's bits (the
    registers of one ldmatrix, and reads of one generation, meet the same leaves again)."""
    uniq: dict[bytes, int] = {}
    nodes: list[Node] = []
    idx = []
    for t in trees:
        k = uniq.get(t.digest)
        if k is None:
            k = uniq[t.digest] = len(nodes)
            nodes.append(t)
        idx.append(k)
    return _interp(nodes, idx, tids, rsyms, {}, memo)


def _interp(
    nodes: list[Node], idx: list[int], tids: list[int], rsyms: list[str], memo: dict, leaves: dict
) -> Node | None:
    first = nodes[0]
    if first.poly is not None:
        lkey = (tuple([t.digest for t in nodes]), tuple(idx), tuple(tids), tuple(rsyms))
        got = leaves.get(lkey, False)
        if got is False:
            got = leaves[lkey] = _interp_leaf(nodes, idx, tids, rsyms, memo)
        return got  # type: ignore[return-value]
    if first.kind == "shfl":
        return _interp_shfl(nodes, idx, tids, rsyms, memo, leaves)
    if first.kind == "xwarp":
        # one read at every writer: the same history, only the address may differ
        if any(t.kind != "xwarp" or t.attrs != first.attrs or t.kids[1].digest != first.kids[1].digest for t in nodes):
            return None
        addr = _interp([t.kids[0] for t in nodes], idx, tids, rsyms, {}, leaves)
        return None if addr is None else Node("xwarp", first.attrs, (addr, first.kids[1]))
    if len(nodes) == 1 and not first.variant and not _has_bits(first):
        return first
    for t in nodes:
        if t.kind != first.kind or t.attrs != first.attrs or len(t.kids) != len(first.kids):
            return None
    kidlists = [list(t.kids) for t in nodes]
    nc = len(first.kids) if first.kind in COMMUTATIVE else (2 if first.kind in COMMUTATIVE_PREFIX2 else 0)
    if nc >= 2 and len(nodes) > 1:
        want = sorted(range(nc), key=lambda i: _shape(first.kids[i]))
        ref = [_shape(first.kids[i]) for i in want]
        for kl in kidlists:
            mine = sorted(kl[:nc], key=_shape)
            if [_shape(k) for k in mine] != ref:
                return None
            for pos, k in zip(want, mine, strict=True):
                kl[pos] = k
    kids = []
    if len(nodes) == 1:  # one writer tree, the writers' bits varying: idx is all zeros all the way down
        for k in first.kids:
            got = memo.get(k.digest)
            if got is None:
                got = _interp([k], idx, tids, rsyms, memo, leaves)
                if got is None:
                    return None
                memo[k.digest] = got
            kids.append(got)
        return Node(first.kind, first.attrs, tuple(kids))
    idx_key: tuple[int, ...] | None = None
    zeros: list[int] | None = None
    for i in range(len(first.kids)):
        uniq: dict[bytes, int] = {}
        sub: list[Node] = []
        remap = []
        for kl in kidlists:
            k = kl[i]
            j = uniq.get(k.digest)
            if j is None:
                j = uniq[k.digest] = len(sub)
                sub.append(k)
            remap.append(j)
        if len(sub) == 1:  # every reader sees this one kid: the single-tree case (its memo key)
            got = memo.get(sub[0].digest)
            if got is None:
                if zeros is None:
                    zeros = [0] * len(idx)
                got = _interp(sub, zeros, tids, rsyms, memo, leaves)
                if got is None:
                    return None
                memo[sub[0].digest] = got
            kids.append(got)
            continue
        if len(sub) == len(nodes):  # as many kids as parents: the reader -> tree map is unchanged
            sidx = idx
            if idx_key is None:
                idx_key = tuple(idx)
            key = (tuple(uniq), idx_key)
        else:
            sidx = [remap[u] for u in idx]
            key = (tuple(uniq), tuple(sidx))
        got = memo.get(key)
        if got is None:
            got = _interp(sub, sidx, tids, rsyms, memo, leaves)
            if got is None:
                return None
            memo[key] = got
        kids.append(got)
    return Node(first.kind, first.attrs, tuple(kids))


def _interp_shfl(
    nodes: list[Node], idx: list[int], tids: list[int], rsyms: list[str], memo: dict, leaves: dict
) -> Node | None:
    """A full-warp butterfly (signs.is_bit_move) at writer t is its operand at t ^ b: the
    shuffle leaves the tree and the operand is interpolated at the partner writers (with a memo
    of its own: every memo entry below holds for one writer list)."""
    first = nodes[0]
    if not is_bit_move(first) or min(tids) < 0:
        return None
    for t in nodes:
        if t.kind != "shfl" or t.attrs != first.attrs or t.kids[1:] != first.kids[1:]:
            return None
    b = const_of(first.kids[1])
    assert b is not None
    partners = [t ^ b for t in tids]
    sub_memo = memo.setdefault(("writers", tuple(partners)), {})
    uniq: dict[bytes, int] = {}
    sub: list[Node] = []
    for t in nodes:
        if uniq.setdefault(t.kids[0].digest, len(sub)) == len(sub):
            sub.append(t.kids[0])
    remap = [uniq[t.kids[0].digest] for t in nodes]
    return _interp(sub, [remap[u] for u in idx], partners, rsyms, sub_memo, leaves)


_SUBSYMS: dict[tuple[str, ...], list[tuple[str, ...]]] = {}


def _subsyms(rsyms: list[str]) -> list[tuple[str, ...]]:
    """The reader symbols of each assignment x (bit i of x is rsyms[i])."""
    key = tuple(rsyms)
    got = _SUBSYMS.get(key)
    if got is None:
        if len(_SUBSYMS) > 1_000:
            _SUBSYMS.clear()
        got = _SUBSYMS[key] = [
            tuple(s for i, s in enumerate(rsyms) if x >> i & 1) for x in range(1 << len(rsyms))
        ]
    return got


def _leaf_tables(
    split: list[list[tuple[tuple[str, ...], int, int]]],
    idx: list[int],
    tids: list[int],
    rsyms: list[str],
    memo: dict,
) -> Node | None:
    """_interp_leaf for writers with bits to fix, by tables over every thread at once: tree u's
    column ``rest`` at writer t is the sum of the coefficients of its terms whose mask t covers,
    the superset-sum (zeta) transform of those coefficients by mask; reader x takes entry
    (idx[x], tids[x]) and the columns are Moebius-transformed over the reader's bits, one numpy
    step per bit instead of a Python step per reader and term. The terms come out in the order
    moebius_cols gives them. Exact in int64 under the bound checked first; None (the caller's
    scan) when it does not hold."""
    n = len(rsyms)
    size = len(idx)
    if size != 1 << n or max(tids) >= size:
        return None
    bound = sum(abs(c) for terms in split for _, _, c in terms)
    if bound >= 1 << (60 - n):
        return None
    # the columns in the order a scan over readers (each reader's terms in order) creates them
    rests: dict[tuple[str, ...], int] = {}
    for terms in split:
        for rest, _, _ in terms:
            rests.setdefault(rest, len(rests))
    order: dict[tuple[str, ...], None] = {}
    for u, t in zip(idx, tids, strict=True):
        for rest, mask, _ in split[u]:
            if t & mask == mask and rest not in order:
                order[rest] = None
        if len(order) == len(rests):
            break
    ikey = ("np", tuple(idx))
    got = memo.get(ikey)
    if got is None:
        got = memo[ikey] = (np.array(idx, dtype=np.intp), np.array(tids, dtype=np.intp))
    iarr, tarr = got
    nu = len(split)
    nr = len(rests)
    w = nr * nu
    # tab[t, r * nu + u]: thread-major, so each step below adds whole contiguous blocks
    tab = np.zeros((size, w), dtype=np.int64)
    # (a monomial is its rest and its mask: one term per entry)
    pos = [mask * w + rests[rest] * nu + u for u, terms in enumerate(split) for rest, mask, _ in terms]
    tab.ravel()[pos] = [c for terms in split for _, _, c in terms]
    for i in range(n):  # zeta: every entry t gets the sum over the masks t covers
        v = tab.reshape(-1, 2, (1 << i) * w)
        v[:, 1, :] += v[:, 0, :]
    cols = tab[tarr[:, None], np.arange(0, w, nu)[None, :] + iarr[:, None]]  # (reader, column)
    for i in range(n):  # Moebius over the reader's bits
        v = cols.reshape(-1, 2, (1 << i) * nr)
        v[:, 1, :] -= v[:, 0, :]
    sub = _subsyms(rsyms)
    out: dict[tuple[str, ...], int] = {}
    for rest in order:
        f = cols[:, rests[rest]]
        nz = np.flatnonzero(f)
        for x, c in zip(nz.tolist(), f[nz].tolist(), strict=True):
            k = tuple(sorted(rest + sub[x]))
            out[k] = out.get(k, 0) + c
    return int_node(Poly(out))


def _interp_leaf(
    nodes: list[Node], idx: list[int], tids: list[int], rsyms: list[str], memo: dict
) -> Node | None:
    """Integer leaves: reader x's value is nodes[idx[x]] with the writer's bits fixed to tids[x],
    interpolated over the reader's bits. A reader's value depends on (tree, writer) alone, and
    on the tree alone when the tree holds none of the fixed bits, so each distinct pair is
    reduced once and the columns are filled from those reductions (created in the order a scan
    over readers and terms meets them)."""
    if any(t.poly is None for t in nodes):
        return None
    fixed = {s: i for i, s in enumerate(rsyms)}
    split = [_bit_terms(t.poly, fixed) for t in nodes]  # type: ignore[arg-type]
    first_order: list[dict[tuple[str, ...], int]] | None = None
    if not any(mask for terms in split for _, mask, _ in terms):
        # no writer bit to fix: reader x sees nodes[idx[x]] as it is
        which = idx
        reds: list[dict[tuple[str, ...], int]] = []
        for terms in split:
            red: dict[tuple[str, ...], int] = {}
            for rest, _, c in terms:
                red[rest] = red.get(rest, 0) + c
            reds.append(red)
        if len(nodes) > 1:
            # (pairs in order of their first reader, as the scan meets them)
            seen: dict[int, None] = dict.fromkeys(idx)
            first_order = [reds[u] for u in seen]
        else:
            first_order = reds
    elif len(idx) >= 32 and min(tids) >= 0:
        got = _leaf_tables(split, idx, tids, rsyms, memo)
        if got is not None:
            return got
    if first_order is None:
        # the distinct (tree, writer) pairs in order of their first reader, and each reader's
        # pair: a function of idx alone within one interpolation (tids is fixed), shared by
        # every leaf under the same reader -> tree map
        pkey = ("pairs", tuple(idx))
        pw = memo.get(pkey)
        if pw is None:
            pair_of: dict[tuple[int, int], int] = {}
            which = [pair_of.setdefault(ut, len(pair_of)) for ut in zip(idx, tids, strict=True)]
            pw = memo[pkey] = (list(pair_of), which)
        pairs, which = pw
        reds = []
        for u, t in pairs:
            red = {}
            if t < 0:  # a tree with no writer bits left: its symbols stay as they are
                for m, c in nodes[u].poly.terms.items():  # type: ignore[union-attr]
                    red[m] = red.get(m, 0) + c
            else:
                for rest, mask, c in split[u]:
                    if t & mask == mask:
                        red[rest] = red.get(rest, 0) + c
            reds.append(red)
        first_order = reds
    order: dict[tuple[str, ...], None] = {}
    for red in first_order:
        for rest in red:
            order.setdefault(rest)
    cols: dict[tuple[str, ...], list[int]] = {}
    size = len(idx)
    if len(reds) == 1:
        red = reds[0]
        for rest in order:
            cols[rest] = [red[rest]] * size
    else:
        for rest in order:
            vals = [red.get(rest, 0) for red in reds]
            cols[rest] = [vals[j] for j in which]
    return int_node(moebius_cols(rsyms, cols))


_HASBITS: dict[bytes, bool] = {}


def _own_kids(n: Node) -> tuple[Node, ...]:
    """The children whose thread bits are the node's own: a shared read's history holds the
    writers' bits, bound inside it."""
    return n.kids[:1] if n.kind == "xwarp" else n.kids


def _has_bits(n: Node) -> bool:
    """True when a thread bit symbol occurs in ``n`` (a writer-relative tree to rename)."""
    got = _HASBITS.get(n.digest)
    if got is None:
        if n.poly is not None:
            got = any(is_bit_symbol(s) for s in n.poly.symbols())
        else:
            got = any(_has_bits(k) for k in _own_kids(n))
        if len(_HASBITS) > 500_000:
            _HASBITS.clear()
        _HASBITS[n.digest] = got
    return got


_TXMASK: dict[bytes, int] = {}
# concretize's results, shared by every call: a node at a thread is a function of the node and of
# the thread's values of the tx bits that occur below it, so that is the key (threads that agree
# on them, and the partner lanes a butterfly reads, share one rebuild)
_CONC: dict[tuple[bytes, int, int], Node] = {}
_ENVS: dict[tuple[int, int], dict[str, int]] = {}


def _tx_mask(n: Node) -> int:
    """The positions of the ``tx`` bits that occur in ``n`` (under a shuffle too)."""
    got = _TXMASK.get(n.digest)
    if got is None:
        got = 0
        if n.poly is not None:
            for s in n.poly.symbols():
                if s[:2] == "tx" and s[2:].isdigit():
                    got |= 1 << int(s[2:])
        else:
            for k in _own_kids(n):
                got |= _tx_mask(k)
        if len(_TXMASK) > 500_000:
            _TXMASK.clear()
        _TXMASK[n.digest] = got
    return got


def concretize(n: Node, env: dict[str, int]) -> Node:
    """``n`` at one writer thread: its thread bits fixed to ``env`` (a renamable tree; env holds
    tx0 .. tx<nb-1>, as forwarding's thread environments do). Results are shared by every call
    through one table keyed on the bits each subtree reads (_CONC)."""
    nb = len(env)
    assert all(f"tx{i}" in env for i in range(nb)), sorted(env)
    t = 0
    for i in range(nb):
        t |= env[f"tx{i}"] << i
    if len(_CONC) > 400_000:
        _CONC.clear()
    return _conc(n, t, nb)


def _env(t: int, nb: int) -> dict[str, int]:
    got = _ENVS.get((t, nb))
    if got is None:
        got = _ENVS[(t, nb)] = {f"tx{i}": (t >> i) & 1 for i in range(nb)}
    return got


def _conc(n: Node, t: int, nb: int) -> Node:
    if not _has_bits(n):
        return n  # no thread bit below: fixing them rebuilds the same tree (the same digest)
    m = _tx_mask(n) & ((1 << nb) - 1)
    key = (n.digest, t & m, nb)
    got = _CONC.get(key)
    if got is not None:
        return got
    if n.poly is not None:
        out = int_node(_partial(n.poly, _env(t, nb))) if m else n
    elif n.kind == "shfl" and is_bit_move(n):
        # the operand at lane ^ b (lane bits are tx0..tx4)
        b = const_of(n.kids[1])
        assert b is not None
        out = _conc(n.kids[0], t ^ (b & 31 & ((1 << nb) - 1)), nb)
    elif not n.variant and not n.kids:
        out = n
    else:
        own = _own_kids(n)
        out = Node(n.kind, n.attrs, tuple(_conc(k, t, nb) for k in own) + n.kids[len(own):])
    _CONC[key] = out
    return out


_SHAPES: dict[bytes, str] = {}


def _shape(n: Node) -> str:
    """A digest of ``n`` with its integer leaves blanked (what interpolation may change)."""
    got = _SHAPES.get(n.digest)
    if got is None:
        if n.poly is not None:
            got = "int"
        else:
            ks = [_shape(k) for k in n.kids]
            nc = len(ks) if n.kind in COMMUTATIVE else (2 if n.kind in COMMUTATIVE_PREFIX2 else 0)
            ks[:nc] = sorted(ks[:nc])
            inner = ",".join(ks)

            got = hashlib.blake2b(repr((n.kind, n.attrs, inner)).encode(), digest_size=8).hexdigest()
        if len(_SHAPES) > 500_000:
            _SHAPES.clear()
        _SHAPES[n.digest] = got
    return got
