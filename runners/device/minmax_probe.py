"""GPU: is a max/min reduction over a row order-free bit for bit? (signed zeros, NaN payloads)

    PYTHONPATH=<repo> python3 runners/device/minmax_probe.py --out DIR [--budget-s 60]

The checker could collapse a free-layout tree of ``max.f32`` (softmax's row max) into an unordered
set only if the instruction is commutative and associative on raw bits: max(+0, -0) must equal
max(-0, +0), and a NaN operand must give one result whichever side it is on. The PTX manual's
wording on signed zeros is not explicit enough to write that rule on, so this measures it: each
operation runs through inline PTX (the exact instruction, not what a compiler may turn it into)
and through ``tl.maximum`` / ``tl.minimum`` (what Triton emits), on every ordered pair of a set of
special values, and records the raw bits of both orders. Writes DIR/minmax_probe.yaml.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

# raw fp32 bits: signed zeros, a quiet and a signalling NaN with payloads, negative NaN, infinities,
# a subnormal and ordinary values
SPECIALS = {
    "+0": 0x00000000,
    "-0": 0x80000000,
    "qnan": 0x7FC00001,
    "qnan2": 0x7FC12345,
    "-qnan": 0xFFC00002,
    "snan": 0x7F800001,
    "+inf": 0x7F800000,
    "-inf": 0xFF800000,
    "sub": 0x00000001,
    "-sub": 0x80000001,
    "one": 0x3F800000,
    "-one": 0xBF800000,
}
OPS = ("max.f32", "min.f32", "max.NaN.f32", "min.NaN.f32", "tl.maximum", "tl.minimum")


def _kernels() -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def asm_kernel(a_ptr, b_ptr, o_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        a = tl.load(a_ptr + i, mask=m)
        b = tl.load(b_ptr + i, mask=m)
        o = tl.inline_asm_elementwise(ASM, "=r,r,r", [a, b], dtype=tl.float32, is_pure=True, pack=1)
        tl.store(o_ptr + i, o, mask=m)

    @triton.jit
    def tl_max(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(o_ptr + i, tl.maximum(tl.load(a_ptr + i, mask=m), tl.load(b_ptr + i, mask=m)), mask=m)

    @triton.jit
    def tl_min(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(o_ptr + i, tl.minimum(tl.load(a_ptr + i, mask=m), tl.load(b_ptr + i, mask=m)), mask=m)

    out: dict[str, Any] = {op: _Asm(asm_kernel, f"{op} $0, $1, $2;") for op in OPS[:4]}
    out["tl.maximum"] = tl_max
    out["tl.minimum"] = tl_min
    return out


class _Asm:
    """``kern[grid](...)`` of one inline-PTX op (the instruction text goes in as a constexpr)."""

    def __init__(self, kern: Any, asm: str) -> None:
        self.kern, self.asm = kern, asm

    def __getitem__(self, grid: Any) -> Any:
        return lambda *a, **kw: self.kern[grid](*a, ASM=self.asm, **kw)


def _hex(u: int) -> str:
    return f"0x{u & 0xFFFFFFFF:08x}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=60.0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    names = list(SPECIALS)
    pairs = [(x, y) for x in names for y in names]
    dev = torch.device("cuda")
    a = _f32([SPECIALS[x] for x, _ in pairs], dev)
    b = _f32([SPECIALS[y] for _, y in pairs], dev)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": str(torch.__version__),
        "triton": str(__import__("triton").__version__),
        "values": {k: _hex(v) for k, v in SPECIALS.items()},
        "ops": {},
    }
    for op, kern in _kernels().items():
        got = _raw(_run(kern, a, b))
        res = {(x, y): got[i] for i, (x, y) in enumerate(pairs)}
        order_dependent = sorted(
            f"{x},{y}: {_hex(res[(x, y)])} vs {_hex(res[(y, x)])}"
            for x, y in pairs
            if x < y and res[(x, y)] != res[(y, x)]
        )
        assoc = _associativity(kern, names, dev)
        report["ops"][op] = {
            "commutative_on_bits": not order_dependent,
            "associative_on_bits": not assoc,
            "non_associative_triples": assoc[:20],
            "order_dependent_pairs": order_dependent,
            "table": {f"{x},{y}": _hex(res[(x, y)]) for x, y in pairs},
        }
        print(
            f"{op:14s} commutative on raw bits: {not order_dependent} ({len(order_dependent)} pairs differ); "
            f"associative: {not assoc} ({len(assoc)} triples differ)"
        )
        for line in order_dependent[:6]:
            print("   ", line)
    (out / "minmax_probe.yaml").write_text(yaml.safe_dump(report, sort_keys=False))
    return 0


def _f32(raw: list[int], dev: Any) -> Any:
    """An fp32 tensor on ``dev`` holding these raw bit patterns."""
    from fixbits.kernels.backend import to_torch
    from fixbits.numerics.formats import from_bits

    return to_torch(from_bits(raw, "fp32"), "fp32", dev)


def _raw(t: Any) -> list[int]:
    """The raw bit patterns of an fp32 tensor, as unsigned ints."""
    from fixbits.kernels.backend import to_numpy
    from fixbits.numerics.formats import bits

    return [int(u) for u in bits(to_numpy(t, "fp32"))]


def _run(kern: Any, a: Any, b: Any) -> Any:
    import torch
    import triton

    o = torch.empty_like(a)
    n = a.numel()
    kern[(triton.cdiv(n, 256),)](a, b, o, n, BLOCK=256)
    return o


def _associativity(kern: Any, names: list[str], dev: Any) -> list[str]:
    """op(op(x, y), z) against op(x, op(y, z)) on every triple: the triples whose bits differ."""
    trip = [(x, y, z) for x in names for y in names for z in names]
    x, y, z = (_f32([SPECIALS[t[j]] for t in trip], dev) for j in range(3))
    left = _raw(_run(kern, _run(kern, x, y), z))
    right = _raw(_run(kern, x, _run(kern, y, z)))
    return [
        f"{','.join(t)}: {_hex(lv)} vs {_hex(rv)}"
        for t, lv, rv in zip(trip, left, right, strict=True)
        if lv != rv
    ]


if __name__ == "__main__":
    sys.exit(main())
