"""The CPU truth model: run any GEMMDesc on numpy inputs, bit for bit.

``emulate`` follows the GEMMDesc module docstring step by step (k_cuts nest -> instruction
chains -> level merges -> output rounding -> epilogue), vectorised over all M x N outputs with
a Python loop over instruction groups only. Tensor-core groups go through the block models of
``fixbits.numerics.blocks``; every scalar add / fma / multiply is a correctly rounded fp32 (or
fp16 / bf16) operation from ``fixbits.numerics.formats``.

Epilogues follow eager PyTorch after a library GEMM: each op reads the output already rounded
to ``out_dtype``, computes in fp32 the way ATen's CUDA kernels write it (opmath float, with
nvcc's default contraction of ``a + b * c`` into an fma where the source has that shape), and
rounds back to ``out_dtype``. ``silu_gate`` is the two eager ops ``silu(x) * gate``, so it rounds
to ``out_dtype`` twice. Transcendentals (exp, erf, tanh) are taken in float64 and rounded once
to fp32, i.e. (almost always) correctly rounded fp32; CUDA's expf / erff / tanhf may differ by
up to 1 fp32 ulp before the rounding to ``out_dtype``, so fp32-output epilogues with those ops
are not expected to be bit-exact against a GPU. relu maps -0 to +0 and keeps NaN.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from fixbits.desc import GEMMDesc, KCut, reduce_1block_fold
from fixbits.numerics import blocks, formats

# Aim each instruction group's (rows, N, instruction_k) float64 product block at ~2 MiB so it
# stays in cache; a speed knob of the emulator only (results do not depend on it).
_CHUNK_BYTES = 1 << 21
# Fewer products than this per batch of chains: numpy's per-call cost outweighs the per-step fma.
_FAST_MIN_PRODUCTS = 64
# At most this many float32 values (chains x draws x rows x N) run as one batch of fma chains.
_FAST_MAX_VALUES = 1 << 24


@dataclass(frozen=True)
class _Leaf:
    """One accumulation chain: its instruction groups, each an array of K indices."""

    groups: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class _Node:
    """One level of the k_cuts nest: the parts (nodes or leaves) and how they merge."""

    parts: tuple[Any, ...]
    merge: str
    level: int


def _chain_groups(idx: np.ndarray, desc: GEMMDesc) -> tuple[np.ndarray, ...]:
    """Instruction groups of one innermost part: the short turn first or last (step 2)."""
    n = len(idx)
    ik = desc.instruction_k
    r = n % desc.k_loop_step
    if desc.residue == "first":
        head, body, tail = idx[:r], idx[r:], idx[:0]
    else:
        head, body, tail = idx[:0], idx[: n - r], idx[n - r :]
    groups: list[np.ndarray] = []
    for part in (head, body, tail):
        groups.extend(part[j : j + ik] for j in range(0, len(part), ik))
    return tuple(groups)


def _cut(idx: np.ndarray, cut: KCut) -> list[np.ndarray]:
    out = []
    for runs in cut.parts(len(idx)):
        pos = np.concatenate([np.arange(s, e) for s, e in runs]) if runs else np.zeros(0, dtype=np.int64)
        out.append(idx[pos])
    return out


def plan(desc: GEMMDesc, k: int) -> _Node | _Leaf:
    """The evaluation tree of one output element's K axis (the same for every element)."""
    desc = desc.at_k(k)

    def build(idx: np.ndarray, level: int) -> _Node | _Leaf:
        if level == len(desc.k_cuts):
            return _Leaf(_chain_groups(idx, desc))
        cut = desc.k_cuts[level]
        return _Node(tuple(build(p, level + 1) for p in _cut(idx, cut)), cut.merge, level)

    return build(np.arange(k, dtype=np.int64), 0)


def group_starts(desc: GEMMDesc, k: int) -> frozenset[int]:
    """The K index each instruction group of ``desc`` at K begins with (where readings that
    group K differently part: fixbits.probe.spikes.straddling)."""
    return frozenset(int(g[0]) for leaf in _leaves(plan(desc, k)) for g in leaf.groups if len(g))


class _Operands:
    """Float64 values and decoded exponents of A rows [r0, r1) and all of B^T, for every draw:
    a (D, rows, K), bt (D, N, K). The leading draw axis lets one pass over the instruction
    groups serve several operand draws (the Python loop over K is the emulator's cost)."""

    def __init__(self, a64: np.ndarray, ea: np.ndarray, bt64: np.ndarray, ebt: np.ndarray) -> None:
        self.a64, self.ea, self.bt64, self.ebt = a64, ea, bt64, ebt

    def products(self, g: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact products (D, rows, N, width) and their raw exponents; columns past len(g) are
        zero products (the padding of a short instruction)."""
        pa, pb = self.a64[..., g], self.bt64[..., g]
        ea, eb = self.ea[..., g], self.ebt[..., g]
        if len(g) < width:
            pad = ((0, 0), (0, 0), (0, width - len(g)))
            pa, pb = np.pad(pa, pad), np.pad(pb, pad)
            ea = np.pad(ea, pad, constant_values=formats.ZERO_EXPONENT)
            eb = np.pad(eb, pad, constant_values=formats.ZERO_EXPONENT)
        with np.errstate(invalid="ignore", over="ignore"):
            p = pa[:, :, None, :] * pb[:, None, :, :]
        e = ea[:, :, None, :] + eb[:, None, :, :]
        return p, e


def _order(leaf: _Leaf) -> np.ndarray:
    """The K indices of one chain in the order its instructions take them."""
    return np.concatenate(leaf.groups) if leaf.groups else np.zeros(0, dtype=np.int64)


def _run_leaf(
    leaf: _Leaf, ops: _Operands, desc: GEMMDesc, model: blocks.BlockModel | None, start: np.ndarray
) -> np.ndarray:
    acc = start
    if desc.instruction == "fma":  # (the float32 batch was tried first: _evaluate)
        for g in leaf.groups:
            for k in g:
                acc = formats.fma_rn(ops.a64[:, :, k][:, :, None], ops.bt64[:, :, k][:, None, :], acc)
        return acc
    assert model is not None
    # an instruction wider than the block is that many blocks, the short one padded to the width
    width = desc.instruction_k if desc.instruction_k > model.L else 0
    if desc.use_fast_accum:
        for g in leaf.groups:
            p, e = ops.products(g, width)
            acc = blocks.fold_chain(p, e, acc, model, scratch=True)
        return acc
    interval = desc.promotion_interval
    assert interval is not None
    zero = np.zeros_like(acc)
    temp, pending = zero, 0
    for g in leaf.groups:
        p, e = ops.products(g, width)
        temp = blocks.fold_chain(p, e, temp, model, scratch=True)
        pending += 1
        if pending == interval:
            acc = formats.add_rn(acc, temp, "fp32")
            temp, pending = zero, 0
    if pending:
        acc = formats.add_rn(acc, temp, "fp32")
    return acc


def _fma_chains_fp32(ops: _Operands, chains: list[np.ndarray], start: np.ndarray) -> np.ndarray | None:
    """Scalar fma chains (P of them, K indices each) in numpy's own float32 adds: (P, D, rows, N),
    or None where that would not be exact.

    When every product is exact in fp32 (fp16 x fp16 always is; bf16 x bf16 unless it leaves
    fp32's range) fma(a, b, c) is the IEEE fp32 sum of two fp32 values, which numpy's sequential
    ``add.accumulate`` gives at C speed: a GEMV over K ~ 10^5 split into 132 x 128 chains goes
    from minutes to a second. Shorter chains are padded with +0 products, which leave a sum
    that started from no -0 unchanged. Anything else (a rounded product, a non-finite result,
    too few products to pay for the batching) returns None and the caller takes the exact
    per-step fma."""
    lengths = [len(c) for c in chains]
    if sum(lengths) < _FAST_MIN_PRODUCTS:
        return None
    acc0 = start.astype(np.float32)
    if not np.array_equal(acc0, start):
        return None
    width = max(lengths, default=0)
    if len(set(lengths)) > 1 and bool(np.any((start == 0) & np.signbit(start))):
        return None
    idx = np.zeros((len(chains), width), dtype=np.int64)
    valid = np.zeros((len(chains), width), dtype=bool)
    for i, c in enumerate(chains):
        idx[i, : len(c)], valid[i, : len(c)] = c, True
    a = np.where(valid, ops.a64[..., idx], 0.0)  # (D, rows, P, L)
    bt = np.where(valid, ops.bt64[..., idx], 0.0)  # (D, N, P, L)
    d, rows, n = acc0.shape
    acc = np.broadcast_to(acc0[..., None], (d, rows, n, len(chains))).astype(np.float32)
    step = max(1, _CHUNK_BYTES // max(1, d * rows * n * len(chains) * 8))
    for j in range(0, width, step):
        with np.errstate(invalid="ignore", over="ignore"):
            p = a[:, :, None, :, j : j + step] * bt[:, None, :, :, j : j + step]
            p32 = p.astype(np.float32)
        if not np.array_equal(p32, p):
            return None
        run = np.concatenate([acc[..., None], p32], axis=-1)
        with np.errstate(invalid="ignore", over="ignore"):
            acc = np.add.accumulate(run, axis=-1, dtype=np.float32)[..., -1]
    if not np.isfinite(acc).all():
        return None
    return np.moveaxis(acc, -1, 0).astype(np.float64)


def _merge_add(x: np.ndarray, y: np.ndarray, dtype: str) -> np.ndarray:
    """One merge add: the fp32 sum, rounded again to a narrow merge dtype. cuBLAS's in-place
    split-K (REDUCTION_SCHEME 1, fp16 C) adds each part to C this way: H200 run n15's cell
    810x14591x32434 of a24-t24-s8-r1 differs from a single rounding to fp16 in one draw, and
    all 72 recorded shapes of the fp16 r1 entries match the double rounding (session 36)."""
    s = formats.add_rn(x, y, "fp32")
    return s if dtype == "fp32" else formats.round_to(s, dtype, "rn")


def _merge(values: list[np.ndarray], how: str, dtype: str) -> np.ndarray:
    if how == "chain":
        s = np.zeros_like(values[0])
        for v in values:
            s = _merge_add(s, v, dtype)
        return s
    if how == "reduce_1block":
        return _reduce_1block(values, dtype)
    n = len(values)
    offsets = [1 << i for i in range(n.bit_length() - 1)]
    if how == "butterfly_down":
        offsets.reverse()
    # every lane at once (one add per level, not per lane): lane i takes lane i ^ off
    lanes = np.stack(values)
    for off in offsets:
        lanes = _merge_add(lanes, lanes[np.arange(n) ^ off], dtype)
    return lanes[0]


def _reduce_1block(values: list[np.ndarray], dtype: str) -> np.ndarray:
    """cuBLAS's reduce_1Block_kernel<float, 128, 7> over the block partials (GEMMDesc docstring)."""
    return reduce_1block_fold(values, lambda x, y: _merge_add(x, y, dtype), np.zeros_like(values[0]))


def _evaluate(
    node: _Node | _Leaf,
    ops: _Operands,
    desc: GEMMDesc,
    model: blocks.BlockModel | None,
    start: np.ndarray,
    chains: dict[int, np.ndarray] | None = None,
) -> np.ndarray:
    """``chains``: the fma chains of this subtree already run as one batch (leaf id -> value);
    an empty dict once the batch was tried and cannot be exact (each leaf then steps its fma,
    with no second try)."""
    if chains is None and desc.instruction == "fma":
        leaves = _leaves(node)
        if len(leaves) * start.size <= _FAST_MAX_VALUES:  # else each part batches its own
            first = start if isinstance(node, _Leaf) else np.zeros_like(start)
            got = _fma_chains_fp32(ops, [_order(x) for x in leaves], first)
            chains = {} if got is None else {id(x): v for x, v in zip(leaves, got, strict=True)}
    if isinstance(node, _Leaf):
        return chains[id(node)] if chains else _run_leaf(node, ops, desc, model, start)
    zero = np.zeros_like(start)
    values = [_evaluate(p, ops, desc, model, zero, chains) for p in node.parts]
    if node.level == 0:
        values = [formats.round_to(v, desc.partial_dtype, "rn") for v in values]
        return _merge(values, node.merge, desc.merge_dtype)
    return _merge(values, node.merge, desc.acc_dtype)


def _leaves(node: _Node | _Leaf) -> list[_Leaf]:
    if isinstance(node, _Leaf):
        return [node]
    return [x for p in node.parts for x in _leaves(p)]


def _check_operand(x: Any, name: str, dtype: str) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.ndim != 2:
        raise ValueError(
            f"emulate: {name} must be a 2-D numpy array, got {type(x).__name__} {getattr(x, 'shape', '')}"
        )
    if x.dtype != formats.np_dtype(dtype):
        raise ValueError(
            f"emulate: {name} has dtype {x.dtype}, the descriptor's in_dtype is {dtype} ({formats.np_dtype(dtype)})"
        )
    return x


def emulate(
    desc: GEMMDesc,
    a: np.ndarray,
    b: np.ndarray,
    *,
    bias: np.ndarray | None = None,
    residual: np.ndarray | None = None,
    gate: np.ndarray | None = None,
    acc: np.ndarray | None = None,
) -> np.ndarray:
    """C = epilogue(A @ B) under ``desc``: a (M, K) and b (K, N) of ``desc.in_dtype``; returns
    (M, N) of ``desc.out_dtype``.

    ``acc`` (optional, fp32 (M, N), only without k_cuts) is an incoming accumulator the chain
    starts from instead of +0, as ``tl.dot(a, b, acc)`` does. ``bias`` (N,) or (M, N),
    ``residual`` and ``gate`` (M, N) feed the epilogue ops that name them.
    """
    if not isinstance(desc, GEMMDesc):
        raise TypeError(f"emulate: desc must be a GEMMDesc, got {type(desc).__name__}")
    a = _check_operand(a, "a", desc.in_dtype)
    b = _check_operand(b, "b", desc.in_dtype)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"emulate: inner dimensions differ: a {a.shape}, b {b.shape}")
    m, k = a.shape
    n = b.shape[1]
    model = (
        None if desc.instruction == "fma" else blocks.model_for(desc.arch, desc.instruction, desc.in_dtype)
    )
    if acc is not None:
        if desc.k_cuts:
            raise ValueError(
                "emulate: an incoming accumulator is defined only for a descriptor without k_cuts"
            )
        acc = np.asarray(acc)
        if acc.shape != (m, n) or acc.dtype != np.float32:
            raise ValueError(f"emulate: acc must be float32 of shape {(m, n)}, got {acc.dtype} {acc.shape}")
    start = None if acc is None else acc[None].astype(np.float64)
    value = _values(desc, model, a[None], b[None], start)[0]
    out = formats.round_to(value, desc.out_dtype, "rn")
    out = _epilogue(desc, out, bias=bias, residual=residual, gate=gate)
    return formats.to_dtype(out, desc.out_dtype)


def emulate_draws(desc: GEMMDesc, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``emulate`` of D operand draws in one pass: a (D, M, K), b (D, K, N) of ``desc.in_dtype``;
    returns (D, M, N), each slice bit for bit ``emulate(desc, a[i], b[i])``. The Python loop over
    K's instruction groups runs once for all draws (the prober checks a reading on several draws
    of one shape). Epilogue ops that read side arrays (bias, residual, gate) are not taken here."""
    if not isinstance(desc, GEMMDesc):
        raise TypeError(f"emulate_draws: desc must be a GEMMDesc, got {type(desc).__name__}")
    for x, name in ((a, "a"), (b, "b")):
        if not isinstance(x, np.ndarray) or x.ndim != 3:
            raise ValueError(f"emulate_draws: {name} must be a 3-D numpy array (draws first)")
        if x.dtype != formats.np_dtype(desc.in_dtype):
            raise ValueError(
                f"emulate_draws: {name} has dtype {x.dtype}, the descriptor's in_dtype is {desc.in_dtype}"
            )
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"emulate_draws: shapes do not pair: a {a.shape}, b {b.shape}")
    model = (
        None if desc.instruction == "fma" else blocks.model_for(desc.arch, desc.instruction, desc.in_dtype)
    )
    value = _values(desc, model, a, b, None)
    out = formats.round_to(value, desc.out_dtype, "rn")
    out = _epilogue(desc, out, bias=None, residual=None, gate=None)
    return formats.to_dtype(out, desc.out_dtype)


def _values(
    desc: GEMMDesc, model: blocks.BlockModel | None, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None
) -> np.ndarray:
    """Float64 (D, M, N) accumulator values before the output rounding, rows in cache-sized chunks."""
    d, m, k = a.shape
    n = b.shape[2]
    tree = plan(desc, k)
    a64, ea = blocks.operand_parts(a, desc.in_dtype)
    bt = np.ascontiguousarray(np.swapaxes(b, 1, 2))
    bt64, ebt = blocks.operand_parts(bt, desc.in_dtype)
    width = max(desc.instruction_k, 1)
    rows = max(1, _CHUNK_BYTES // max(1, d * n * width * 8))
    value = np.empty((d, m, n), dtype=np.float64)
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        ops = _Operands(a64[:, r0:r1], ea[:, r0:r1], bt64, ebt)
        start = np.zeros((d, r1 - r0, n)) if acc is None else acc[:, r0:r1]
        value[:, r0:r1] = _evaluate(tree, ops, desc, model, start)
    return value


# -- epilogue ---------------------------------------------------------------------------------

_F32 = "fp32"


def _f32(x: float) -> float:
    return float(np.float32(x))


def _side(x: np.ndarray | None, name: str, kind: str, shape: tuple[int, int]) -> np.ndarray:
    if x is None:
        raise ValueError(f"emulate: epilogue op {kind!r} needs the {name}= array")
    x = np.asarray(x)
    try:
        formats.dtype_name(x.dtype)
    except ValueError as exc:
        raise ValueError(f"emulate: {name}: {exc}") from None
    try:
        return np.broadcast_to(x.astype(np.float64), shape)
    except ValueError:
        raise ValueError(
            f"emulate: {name} of shape {x.shape} does not broadcast to the output {shape}"
        ) from None


def _rn32(x: np.ndarray) -> np.ndarray:
    return formats.round_to(x, _F32, "rn")


def silu_f32(x: np.ndarray) -> np.ndarray:
    """ATen: x / (1 + exp(-x)) in fp32."""
    with np.errstate(over="ignore"):
        t = _rn32(np.exp(-x))
    return formats.div_rn(x, formats.add_rn(1.0, t), _F32)


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu_f32(x: np.ndarray) -> np.ndarray:
    """ATen (approximate='none'): x * 0.5 * (1 + erf(x * M_SQRT1_2)) in fp32."""
    u = formats.mul_rn(x, _f32(math.sqrt(0.5)))
    er = _rn32(_ERF(u).astype(np.float64))
    return formats.mul_rn(formats.mul_rn(x, 0.5), formats.add_rn(1.0, er))


def gelu_tanh_f32(x: np.ndarray) -> np.ndarray:
    """ATen (approximate='tanh'): 0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3))) in fp32, with
    ``x + kKappa * x_cube`` contracted to one fma."""
    k_beta = _f32(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5)
    k_kappa = _f32(0.044715)
    cube = formats.mul_rn(formats.mul_rn(x, x), x)
    inner = formats.mul_rn(k_beta, formats.fma_rn(k_kappa, cube, x))
    th = _rn32(np.tanh(inner))
    return formats.mul_rn(formats.mul_rn(0.5, x), formats.add_rn(1.0, th))


def _epilogue(desc: GEMMDesc, x: np.ndarray, *, bias: Any, residual: Any, gate: Any) -> np.ndarray:
    out = desc.out_dtype
    shape = x.shape
    for op in desc.epilogue:
        if op.kind == "bias":
            y = formats.add_rn(x, _side(bias, "bias", op.kind, shape), _F32)
        elif op.kind == "residual":
            y = formats.add_rn(x, _side(residual, "residual", op.kind, shape), _F32)
        elif op.kind == "scale":
            assert op.value is not None
            y = formats.mul_rn(x, _f32(op.value))
        elif op.kind == "relu":
            y = np.where((x > 0) | np.isnan(x), x, 0.0)
        elif op.kind == "silu_gate":
            s = formats.round_to(silu_f32(x), out, "rn")  # eager: silu(x) is its own op
            y = formats.mul_rn(s, _side(gate, "gate", op.kind, shape))
        elif op.kind == "gelu":
            y = gelu_f32(x)
        elif op.kind == "gelu_tanh":
            y = gelu_tanh_f32(x)
        else:  # desc validation makes this unreachable
            raise ValueError(f"emulate: unknown epilogue op {op.kind!r}")
        x = formats.round_to(y, out, "rn")
    return x


# -- `fixbits emulate` ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--desc", required=True, help="descriptor YAML file (GEMMDesc.to_yaml form)")
    parser.add_argument("--shape", nargs=3, type=int, metavar=("M", "N", "K"), required=True)
    parser.add_argument("--kind", default="ordinary", help="input kind (fixbits.inputs.KINDS)")
    parser.add_argument("--seed", type=int, default=0, help="A is drawn with SEED, B with SEED + 1")
    parser.add_argument("--save", help="write the output to this .npy file")


def run(args: argparse.Namespace) -> int:
    from fixbits.inputs import draw

    try:
        with open(args.desc) as fh:
            desc = GEMMDesc.from_yaml(fh.read(), where=args.desc)
        m, n, k = args.shape
        a = draw((m, k), desc.in_dtype, args.kind, args.seed)
        b = draw((k, n), desc.in_dtype, args.kind, args.seed + 1)
        c = emulate(desc, a, b)
    except (OSError, ValueError) as exc:  # DescError is a ValueError
        print(f"fixbits emulate: {exc}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(np.ascontiguousarray(c).tobytes()).hexdigest()
    print(
        f"desc {desc.short_hash} ({desc.family})  shape {m}x{n}x{k}  {desc.in_dtype}->{desc.out_dtype}  kind {args.kind} seed {args.seed}"
    )
    print(f"sha256 {digest}")
    flat = c.reshape(-1)[:4]
    print(
        "first "
        + "  ".join(
            f"{float(v)!r} (0x{int(u):0{2 * c.itemsize}x})"
            for v, u in zip(flat, formats.bits(flat), strict=True)
        )
    )
    if args.save:
        np.save(args.save, c)
    return 0
