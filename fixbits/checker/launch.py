"""Opt-in launch-shape specialisation of the checker (paper §6, 'N_MULT families').

Kernels built for different tile widths are different functions of a runtime extent (BLOCK_N =
1024 and 2048 agree for N = 1000, not for N = 1500). They can only be certified equal for one
launch: a ``LaunchShape`` names the integer scalar parameters' values (and optionally the grid),
the walk takes them as constants, and the signature's digest carries the specialisation, so a
specialised signature never equals an unspecialised one or one specialised to other values. The
grid's numbers are not in the digest (whether one was given is): configs of one problem run at
grids of their own, and what the walk proved from a grid is in the trees it built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fixbits.checker.forms import Poly


@dataclass(frozen=True)
class LaunchShape:
    """Values of integer scalar kernel parameters, by PTX name (``k_param_3``) or index (3), and
    the grid (blocks per axis) when known; ``ints`` is kept sorted so equal specs hash equally."""

    ints: tuple[tuple[str | int, int], ...] = ()
    grid: tuple[int, int, int] | None = None

    @classmethod
    def of(cls, ints: Mapping[str | int, int], grid: tuple[int, ...] | None = None) -> LaunchShape:
        for k, v in ints.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ValueError(f"launch parameter key {k!r}: give a PTX parameter name or an index")
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"launch parameter {k!r}: value {v!r} is not an integer")
        g = None
        if grid is not None:
            gl = list(grid) + [1] * (3 - len(grid))
            if len(gl) != 3 or any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in gl):
                raise ValueError(f"launch grid {grid!r}: give 1 to 3 positive integers")
            g = (gl[0], gl[1], gl[2])
        return cls(tuple(sorted(ints.items(), key=lambda kv: (isinstance(kv[0], str), str(kv[0])))), g)

    def key(self) -> str:
        """The text the digest is tagged with (after names are resolved to indices)."""
        return f"ints={list(self.ints)!r};grid={self.grid!r}"

    def resolve(self, params: list[str], decls: Mapping[str, str] | None = None) -> dict[str, int]:
        """PTX parameter name -> value; a name or index the entry does not have, or a pointer
        parameter, is an error that names it (a silent miss would specialise nothing)."""
        out: dict[str, int] = {}
        for k, v in self.ints:
            if isinstance(k, int):
                if not 0 <= k < len(params):
                    raise ValueError(
                        f"launch parameter index {k} out of range: the entry has {len(params)} parameters"
                    )
                name = params[k]
            else:
                if k not in params:
                    raise ValueError(
                        f"launch parameter {k!r} is not a parameter of the entry ({', '.join(params)})"
                    )
                name = k
            ty = (decls or {}).get(name, "")
            if ".ptr" in ty or not re.search(r"\.[su](8|16|32|64)\b", ty or ".u32"):
                raise ValueError(f"launch parameter {name!r} is not an integer scalar ({ty.strip() or '?'})")
            if name in out and out[name] != v:
                raise ValueError(f"launch parameter {name!r} given twice with different values")
            lim = 64 if re.search(r"64\b", ty) else 32
            if not -(1 << (lim - 1)) <= v < (1 << lim):
                raise ValueError(f"launch parameter {name!r}: {v} does not fit {lim} bits")
            out[name] = v
        return out


def param_decls(text: str) -> dict[str, str]:
    """Declared type text of every ``.param`` of a PTX module, by name (``.u64 .ptr .global ...``)."""
    pat = r"\.param\s+((?:\.[\w:]+\s+(?:\d+\s+)?)+?)([\w$]+)\s*[,)\n]"
    return {m.group(2): m.group(1) for m in re.finditer(pat, text)}


_MAX_BITS = 12  # thread bits enumerated exactly (4,096 assignments)
U_EQ_BOUND = 1 << 16  # unsigned eq decided only where |a - b| < 2^16 (the narrowest setp width)


def pred_truth(pred: object, grid: tuple[int, int, int] | None) -> bool | None:
    """Truth of a coordinate predicate for every thread of every block of the launch: True or
    False when the same for all of them, None when it differs or is not decided here.

    Decided: ``cmp`` nodes in the walk's canonical integer form (``d <= 0`` / ``d == 0``,
    signed only) whose ``d`` is a polynomial over thread bits (enumerated exactly), block ids
    entering linearly (bounded by the grid, which must be given for them) and constants; ``not``
    / ``and`` / ``or`` over those."""
    from fixbits.checker.node import Node

    assert isinstance(pred, Node)
    k = pred.kind
    if k == "true":
        return True
    if k == "not" and len(pred.kids) == 1:
        t = pred_truth(pred.kids[0], grid)
        return None if t is None else not t
    if k in ("and", "or") and pred.kids:
        return join_truths(k, [pred_truth(x, grid) for x in pred.kids])
    if k != "cmp" or len(pred.kids) != 2 or pred.attrs[1:2] != ("s",) or pred.attrs[0] not in ("le", "eq"):
        return None
    d, z = pred.kids[0].poly, pred.kids[1].poly
    if d is None or z is None or not z.is_const() or z.const_value() != 0:
        return None
    rng = _range(d, grid)
    if rng is None:
        return None
    return decide_cmp(pred.attrs[0], *rng)


def join_truths(op: str, vals: Sequence[bool | None]) -> bool | None:
    """Three-valued ``and`` / ``or``: decided only when the decided operands settle it."""
    if op == "and":
        return False if False in vals else (True if all(v is True for v in vals) else None)
    return True if True in vals else (False if all(v is False for v in vals) else None)


def decide_cmp(op: str, lo: int, hi: int) -> bool | None:
    """``d <= 0`` / ``d == 0`` for every d in [lo, hi]: True, False, or None when it varies."""
    if op == "le":
        return True if hi <= 0 else (False if lo > 0 else None)
    return True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None)


def _block_part(
    d: object, blocks: list[str], grid: tuple[int, int, int] | None
) -> tuple[int, int, Poly] | None:
    """(min, max) of a polynomial's block-id terms over the grid, and the rest of it; None when a
    block id is not a lone linear term (or no grid is known), so its extremes do not bound it."""
    from fixbits.checker.forms import Poly

    assert isinstance(d, Poly)
    lo_b = hi_b = 0
    for s in blocks:
        if s not in ("ctaid.x", "ctaid.y", "ctaid.z") or grid is None:
            return None
        mono = [(m, c) for m, c in d.terms.items() if s in m]
        if len(mono) != 1 or mono[0][0] != (s,):
            return None  # a block id in a product: not bounded by its extremes here
        c = mono[0][1]
        top = grid["xyz".index(s[-1])] - 1
        lo_b += min(0, c * top)
        hi_b += max(0, c * top)
    return lo_b, hi_b, Poly({m: c for m, c in d.terms.items() if not any(x in blocks for x in m)})


def _range(d: object, grid: tuple[int, int, int] | None) -> tuple[int, int] | None:
    """[min, max] of a polynomial over the launch, None when not bounded here."""
    from fixbits.checker.forms import Poly, is_bit_symbol
    from fixbits.checker.forward import eval_all

    assert isinstance(d, Poly)
    bits = sorted(s for s in d.symbols() if is_bit_symbol(s))
    blocks = sorted(s for s in d.symbols() if not is_bit_symbol(s))
    if len(bits) > _MAX_BITS:
        return None
    split = _block_part(d, blocks, grid)
    if split is None:
        return None
    lo_b, hi_b, rest = split
    # every bit symbol is 0 or 1, so renaming them tx0 .. tx{k-1} keeps the set of values:
    # forward.eval_all enumerates (and caches) it
    ren = {b: f"tx{i}" for i, b in enumerate(bits)}
    vals = eval_all(Poly({tuple(ren[x] for x in m): c for m, c in rest.terms.items()}), len(bits))
    return min(vals) + lo_b, max(vals) + hi_b


def corpus_launch(module_name: str, shape: Mapping[str, int], label: str) -> LaunchShape | None:
    """The launch a corpus family's config ran with, from the module's opt-in ``launch_ints``
    (``(shape, cfg, pinned) -> ({arg name: value}, grid)``, None when unknown) and the order of
    the non-constexpr arguments of its ``aot`` signature (the PTX parameter indices); None when
    the module does not say (the config is then signed unspecialised)."""
    import importlib

    from fixbits.corpus.common import Config

    mod = importlib.import_module(module_name)
    fn = getattr(mod, "launch_ints", None)
    if fn is None or ":" not in label:
        return None
    variant, _, rest = label.partition(":")
    blocks, w, st = [], 0, 0
    for item in rest.split(","):
        k, _, v = item.partition("=")
        if k == "w":
            w = int(v)
        elif k == "s":
            st = int(v)
        else:
            blocks.append((k, int(v)))
    cfg = Config(tuple(blocks), w, st)
    pinned: bool | str = {"free": False, "pinned": True}.get(variant, variant)
    got = fn(dict(shape), cfg, pinned)
    if got is None:
        return None
    ints, grid = got
    kernels = mod.aot(dict(shape), "fp32", cfg)
    if len(kernels) != 1:
        return None
    sig = kernels[0][1]
    order = [name for name, ty in sig.items() if ty != "constexpr"]
    return LaunchShape.of({order.index(name): v for name, v in ints.items()}, grid)


def thread_truths(pred: object, grid: tuple[int, int, int] | None, nbits: int) -> list[bool | None] | None:
    """``pred_truth`` per thread of a block of 2^nbits threads (``tid.x`` bits ``tx0 ..``): entry
    t is True / False when the predicate has that value at thread t in every block of the launch,
    None when not decided there; None altogether when the predicate is not a coordinate form
    decided here (the forms of ``pred_truth``: signed ``d <= 0`` / ``d == 0``; and unsigned
    ``d == 0``).

    Unsigned ``eq`` (``setp.eq.u32 a, b``, walked as ``a - b == 0``) is decided from the exact
    integer value of d: equality of two registers is equality of their bits, whatever the sign
    convention, so d == 0 gives True (a and b are the same integer, hence the same bits); and
    0 < |d| < 2^16 gives False (a and b differ by less than 2^w for every setp width w >= 16,
    so they differ modulo 2^w: no wrap can make them equal). A d whose range over the launch
    reaches 2^16 in magnitude is left undecided. Unsigned ``le`` is not decided: ``a <= b``
    unsigned is not a function of d alone once a or b may wrap below zero."""
    from fixbits.checker.forms import is_bit_symbol
    from fixbits.checker.forward import eval_all
    from fixbits.checker.node import Node

    assert isinstance(pred, Node)
    size = 1 << nbits
    k = pred.kind
    if k == "true":
        return [True] * size
    if k == "not" and len(pred.kids) == 1:
        t = thread_truths(pred.kids[0], grid, nbits)
        return None if t is None else [None if v is None else not v for v in t]
    if k in ("and", "or") and pred.kids:
        ts = [thread_truths(x, grid, nbits) for x in pred.kids]
        if any(t is None for t in ts):
            return None
        return [join_truths(k, vals) for vals in zip(*ts, strict=True)]  # type: ignore[misc]
    if k != "cmp" or len(pred.kids) != 2 or pred.attrs[:2] not in (("le", "s"), ("eq", "s"), ("eq", "u")):
        return None
    unsigned = pred.attrs[1] == "u"
    d, z = pred.kids[0].poly, pred.kids[1].poly
    if d is None or z is None or not z.is_const() or z.const_value() != 0:
        return None
    bits = [s for s in d.symbols() if is_bit_symbol(s)]
    if any(not s.startswith("tx") or int(s[2:]) >= nbits for s in bits):
        return None
    blocks = [s for s in d.symbols() if not is_bit_symbol(s)]
    split = _block_part(d, blocks, grid)
    if split is None:
        return None
    lo_b, hi_b, rest = split
    res: list[bool | None] = []
    for v in eval_all(rest, nbits):
        lo, hi = v + lo_b, v + hi_b
        if unsigned and not -U_EQ_BOUND < lo <= hi < U_EQ_BOUND:
            res.append(None)  # a wrap modulo 2^w is not excluded
        else:
            res.append(decide_cmp(pred.attrs[0], lo, hi))
    return res
