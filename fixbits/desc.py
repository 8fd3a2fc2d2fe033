"""GEMMDesc: the frozen record of everything that fixes a GEMM's bits, and nothing else.

Two equal descriptors owe each other the same output bytes on the same inputs. Block sizes,
warps, stages, swizzles and grids are speed knobs and never appear here (paper §3.2).

The contracted axis K of one output element is evaluated as follows (the emulator, the
prober and the Triton kernels all read this docstring as the contract):

1. ``k_cuts`` is a nest, outermost first. Level 0 cuts [0, K) into parts; each following
   level cuts every part of the level above (its own elements, in their order) again.
   A CONTIGUOUS cut makes consecutive ranges; a STRIDED cut deals tiles of ``span`` elements
   round-robin to ``count`` groups (group g holds tiles g, g+count, g+2*count, ...); a
   ``capped`` strided cut's tile is min(span, ceil(P / count)), P the nominal length of the
   parts it cuts (``GEMMDesc.at_k`` gives the plain descriptor it is at one K).
2. An innermost part is one accumulation chain over its elements in order: instruction
   groups of ``instruction_k`` products (the residue turn of ``len % k_loop_step`` elements
   first or last, padded with zero products to whole instructions), each group folded by
   the architecture's block model (fixbits.numerics.blocks). With ``use_fast_accum`` each
   group folds straight into the running accumulator (one rounding a step); otherwise
   ``promotion_interval`` groups accumulate into a zero-started temporary which is then
   added to the accumulator with one round-to-nearest fp32 add (per-MMA accumulation is
   ``promotion_interval == 1``). The scalar path (``instruction == "fma"``) is a chain of
   round-to-nearest fp32 fmas starting from +0.
3. The parts of each level are combined by that level's ``merge``: ``chain`` sums them in
   order starting from +0 (round-to-nearest), ``butterfly_up`` / ``butterfly_down`` fold
   them as lanes exchanging with xor offsets 1, 2, 4, ... or count/2, ..., 1; ``reduce_1block``
   is cuBLAS's ``reduce_1Block_kernel<float, 128, 7>`` (any count): 128 threads, thread t
   chaining parts t, t+128, ... from +0, then q[t] += q[t+64], q[t] += q[t+32], then
   u[j] = q[j] + q[4+j] + ... + q[28+j] (a chain from +0, j = 0..3) and ((u0 + u1) + u2) + u3
   (measured for the workspace GEMV, ALGO_ID 14, from recorded H200 cells). At level 0
   each part's value is first rounded to ``partial_dtype`` and the merge runs in
   ``merge_dtype``: each add is the fp32 sum rounded again to a narrow ``merge_dtype`` (two
   roundings, as cuBLAS's in-place split-K adds a part to an fp16 C); inner levels stay in the
   accumulator type.
4. The result is rounded (nearest-even) to ``out_dtype``; each epilogue op then runs in
   fp32 on that rounded value and rounds back to ``out_dtype``, as an eager PyTorch
   epilogue after a library GEMM does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import yaml

Layout = Literal["contiguous", "strided"]
Merge = Literal["chain", "butterfly_up", "butterfly_down", "reduce_1block"]
SpanRule = Literal["ceil", "floor", "tail_dropped", "capped"]
Residue = Literal["first", "last"]

ARCHES: tuple[str, ...] = ("sm_80", "sm_90", "sm_100", "sm_103")
INSTRUCTIONS: tuple[str, ...] = ("mma", "wgmma", "tcgen05", "fma")
IN_DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
ACC_DTYPES: tuple[str, ...] = ("fp32",)
OUT_DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16")
PARTIAL_DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16")
LAYOUTS: tuple[str, ...] = ("contiguous", "strided")
MERGES: tuple[str, ...] = ("chain", "butterfly_up", "butterfly_down", "reduce_1block")
SPAN_RULES: tuple[str, ...] = ("ceil", "floor", "tail_dropped", "capped")
RESIDUES: tuple[str, ...] = ("first", "last")
EPILOGUE_KINDS: tuple[str, ...] = ("bias", "relu", "silu_gate", "gelu", "gelu_tanh", "residual", "scale")

# Which instruction widths each (instruction, input family) admits: hardware facts.
_INSTRUCTION_K: dict[tuple[str, str], tuple[int, ...]] = {
    ("mma", "16bit"): (8, 16),
    ("mma", "fp8"): (32,),
    ("wgmma", "16bit"): (16,),
    ("wgmma", "fp8"): (32,),
    ("tcgen05", "16bit"): (16,),
    ("tcgen05", "fp8"): (32,),
    ("fma", "16bit"): (1,),
    ("fma", "fp8"): (1,),
}


class DescError(ValueError):
    """A descriptor, or its serialised form, is malformed; the message names the field."""


_V = TypeVar("_V")


def reduce_1block_fold(parts: Sequence[_V], add: Callable[[_V, _V], _V], zero: _V, threads: int = 128) -> _V:
    """The add order of the ``reduce_1block`` merge (item 3 of the module docstring), for any kind
    of value: the emulator's bits, the prober's canonical tree and its meet order walk this one
    schedule, so they cannot drift apart."""
    q = [zero] * threads
    for i, v in enumerate(parts):
        q[i % threads] = add(q[i % threads], v)
    for off in (64, 32):
        q = [add(q[t], q[t + off]) for t in range(off)]
    total = zero
    for j in range(4):
        u = zero
        for g in range(8):
            u = add(u, q[4 * g + j])
        total = add(total, u)
    return total


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise DescError(f"{name}={value!r} is not one of {', '.join(allowed)}")


def _positive(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DescError(f"{name}={value!r} must be a positive integer")


@dataclass(frozen=True)
class KCut:
    """One level of the K-cut nest.

    CONTIGUOUS with ``span``: parts of ``span`` elements, the last one short.
    CONTIGUOUS with ``count``: ``count`` parts whose span is n/count rounded (``span_rule``
    ceil or floor) to a multiple of ``granule``; the last part takes what is left.
    ``tail_dropped`` is cuBLASLt's nvjet split-K rule (ALGO_ID 66, measured on the H200):
    span = granule * ceil(floor(n / count) / granule) and every part, the last included,
    stops at its span, so the last n - count*span elements are never summed when that is
    positive (the split-K tail defect) and the trailing parts are short or empty otherwise.
    ``aligned_granule`` (count cuts only): when the cut length n is a multiple of it, spans
    round to it instead of ``granule`` (cuBLASLt 13.1 split-K on the H200, run s2b: spans round
    to 64 when 64 | K, else to 8; 16 | K and 32 | K keep 8). None: ``granule`` always.
    STRIDED: tiles of ``span`` elements dealt round-robin to ``count`` groups. With
    ``span_rule="capped"`` the tile is min(span, ceil(P / count)), P the nominal length of the
    part being cut: K at level 0, else the span of the level above (its full parts' length, so a
    short last part keeps the others' tile). cuBLASLt 13.1's gemv2T lane-tree options c56 / c92 /
    c100 on the H200 (runs s12/a13r, s13/a13v): the tile shrinks below 64 on short K.
    ``GEMMDesc.at_k`` turns a capped cut into the plain one it is at a given K.
    """

    layout: Layout
    count: int | None = None
    span: int | None = None
    granule: int = 1
    span_rule: SpanRule = "ceil"
    merge: Merge = "chain"
    aligned_granule: int | None = None

    def __post_init__(self) -> None:
        _choice("k_cuts.layout", self.layout, LAYOUTS)
        _choice("k_cuts.merge", self.merge, MERGES)
        _choice("k_cuts.span_rule", self.span_rule, SPAN_RULES)
        _positive("k_cuts.count", self.count, optional=True)
        _positive("k_cuts.span", self.span, optional=True)
        _positive("k_cuts.granule", self.granule)
        _positive("k_cuts.aligned_granule", self.aligned_granule, optional=True)
        if self.aligned_granule is not None and (self.layout != "contiguous" or self.count is None):
            raise DescError("k_cuts: aligned_granule applies to count cuts only")
        if self.span_rule == "capped" and self.layout != "strided":
            raise DescError("k_cuts: span_rule=capped applies to strided cuts only (tile min(span, ceil(P / count)))")
        if self.layout == "strided" and (self.count is None or self.span is None):
            raise DescError("k_cuts: a strided cut needs both count (groups) and span (tile)")
        if self.layout == "contiguous" and (self.count is None) == (self.span is None):
            raise DescError("k_cuts: a contiguous cut needs exactly one of count or span")
        if self.merge in ("butterfly_up", "butterfly_down"):
            if self.count is None or self.count & (self.count - 1):
                raise DescError(f"k_cuts: merge={self.merge} needs a power-of-two count, got {self.count}")

    def granule_for(self, n: int) -> int:
        """The span granule this count cut uses on a length of n."""
        a = self.aligned_granule
        return a if a is not None and n and n % a == 0 else self.granule

    def to_dict(self) -> dict[str, Any]:
        """Field mapping; ``aligned_granule`` only when set (descriptor hashes from before it stay)."""
        d = dataclasses.asdict(self)
        if d["aligned_granule"] is None:
            del d["aligned_granule"]
        return d

    def tile(self, nominal: int) -> int:
        """A strided cut's tile on a part of nominal length ``nominal``."""
        assert self.count is not None and self.span is not None
        if self.span_rule != "capped":
            return self.span
        return max(1, min(self.span, -(-nominal // self.count)))

    def parts(self, n: int) -> list[list[tuple[int, int]]]:
        """Cut n elements; each part is its ordered list of [start, stop) runs. A capped strided
        cut takes n as its nominal length (right at level 0; deeper, GEMMDesc.at_k resolves it)."""
        if self.layout == "strided":
            assert self.count is not None and self.span is not None
            t = self.tile(n)
            groups: list[list[tuple[int, int]]] = [[] for _ in range(self.count)]
            for i, start in enumerate(range(0, n, t)):
                groups[i % self.count].append((start, min(n, start + t)))
            return groups
        if self.span is not None:
            return [[(s, min(n, s + self.span))] for s in range(0, max(n, 1), self.span)] if n else [[]]
        assert self.count is not None
        g = self.granule_for(n)
        if self.span_rule == "tail_dropped":
            span = g * -(-(n // self.count) // g)
        else:
            granules = n / (self.count * g)
            rounded = math.floor(granules) if self.span_rule == "floor" else math.ceil(granules)
            span = rounded * g
        out: list[list[tuple[int, int]]] = []
        for i in range(self.count):
            start = min(n, i * span)
            stop = min(n, start + span)
            if i == self.count - 1 and self.span_rule != "tail_dropped":
                stop = n
            out.append([(start, stop)] if stop > start else [])
        return out


@dataclass(frozen=True)
class EpilogueOp:
    """One elementwise op after the GEMM; ``value`` is the factor of ``scale``."""

    kind: str
    value: float | None = None

    def __post_init__(self) -> None:
        _choice("epilogue.kind", self.kind, EPILOGUE_KINDS)
        if (self.kind == "scale") != (self.value is not None):
            raise DescError("epilogue: 'scale' and only 'scale' takes a value")


@dataclass(frozen=True)
class GEMMDesc:
    """The arithmetic of one GEMM (see the module docstring for its exact meaning)."""

    arch: str
    instruction: str
    instruction_k: int
    in_dtype: str
    out_dtype: str = "fp32"
    acc_dtype: str = "fp32"
    use_fast_accum: bool = True
    promotion_interval: int | None = None
    k_loop_step: int = 64
    residue: Residue = "last"
    k_cuts: tuple[KCut, ...] = ()
    partial_dtype: str = "fp32"
    merge_dtype: str = "fp32"
    epilogue: tuple[EpilogueOp, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        _choice("arch", self.arch, ARCHES)
        _choice("instruction", self.instruction, INSTRUCTIONS)
        _choice("in_dtype", self.in_dtype, IN_DTYPES)
        _choice("out_dtype", self.out_dtype, OUT_DTYPES)
        _choice("acc_dtype", self.acc_dtype, ACC_DTYPES)
        _choice("partial_dtype", self.partial_dtype, PARTIAL_DTYPES)
        _choice("merge_dtype", self.merge_dtype, PARTIAL_DTYPES)
        _choice("residue", self.residue, RESIDUES)
        family = "fp8" if self.in_dtype.startswith("fp8") else "16bit"
        allowed = _INSTRUCTION_K[(self.instruction, family)]
        if self.instruction_k not in allowed:
            raise DescError(
                f"instruction_k={self.instruction_k} is not valid for {self.instruction} on "
                f"{self.in_dtype}; valid: {', '.join(map(str, allowed))}"
            )
        if self.instruction == "wgmma" and self.arch != "sm_90":
            raise DescError(f"instruction=wgmma exists only on sm_90, not {self.arch}")
        if self.instruction == "tcgen05" and self.arch not in ("sm_100", "sm_103"):
            raise DescError(f"instruction=tcgen05 exists only on sm_100/sm_103, not {self.arch}")
        _positive("k_loop_step", self.k_loop_step)
        if self.k_loop_step % self.instruction_k:
            raise DescError(
                f"k_loop_step={self.k_loop_step} must be a multiple of instruction_k={self.instruction_k}"
            )
        if self.use_fast_accum:
            if self.promotion_interval is not None:
                raise DescError("promotion_interval applies only when use_fast_accum is false")
        else:
            if self.instruction == "fma":
                raise DescError("the scalar fma path has no fast-accumulation switch: keep use_fast_accum true")
            _positive("promotion_interval", self.promotion_interval)
        if not isinstance(self.k_cuts, tuple) or not all(isinstance(c, KCut) for c in self.k_cuts):
            raise DescError("k_cuts must be a tuple of KCut")
        if not isinstance(self.epilogue, tuple) or not all(isinstance(e, EpilogueOp) for e in self.epilogue):
            raise DescError("epilogue must be a tuple of EpilogueOp")

    # -- identity ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["k_cuts"] = [c.to_dict() for c in self.k_cuts]
        d["epilogue"] = [dict(e) for e in d["epilogue"]]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "descriptor") -> GEMMDesc:
        if not isinstance(data, dict):
            raise DescError(f"{where}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DescError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        data = dict(data)
        try:
            data["k_cuts"] = tuple(KCut(**c) for c in data.get("k_cuts", ()))
            data["epilogue"] = tuple(EpilogueOp(**e) for e in data.get("epilogue", ()))
            return cls(**data)
        except TypeError as exc:
            raise DescError(f"{where}: {exc}") from exc
        except DescError as exc:
            raise DescError(f"{where}: {exc}") from exc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GEMMDesc:
        return cls.from_dict(json.loads(text))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=True)

    @classmethod
    def from_yaml(cls, text: str, *, where: str = "descriptor") -> GEMMDesc:
        return cls.from_dict(yaml.safe_load(text), where=where)

    @property
    def short_hash(self) -> str:
        """12 hex digits of sha256 over the canonical JSON: stable across runs and machines."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    def at_k(self, k: int) -> GEMMDesc:
        """The descriptor with every capped strided cut made the plain cut it is at this K (the
        same tree for every output element); itself when it has none."""
        if not any(c.span_rule == "capped" for c in self.k_cuts):
            return self
        cuts: list[KCut] = []
        nominal: int | None = k
        for c in self.k_cuts:
            if c.span_rule == "capped":
                if nominal is None:
                    raise DescError("k_cuts: a capped strided cut below a strided cut has no nominal length")
                c = dataclasses.replace(c, span=c.tile(nominal), span_rule="ceil")
            cuts.append(c)
            if nominal is not None:
                if c.layout == "strided":
                    nominal = None
                else:
                    first = c.parts(nominal)[0]
                    nominal = sum(e - s for s, e in first)
        return self.replace(k_cuts=tuple(cuts))

    def replace(self, **changes: Any) -> GEMMDesc:
        return dataclasses.replace(self, **changes)

    @property
    def family(self) -> str:
        """The paper's algorithm family this descriptor belongs to (for reports and dispatch)."""
        if self.instruction == "fma":
            if any(c.merge != "chain" for c in self.k_cuts):
                return "gemv_lane_tree"
            if len(self.k_cuts) >= 2:
                return "chained_chunks"
            return "gemv_contiguous" if self.k_cuts else "scalar_chain"
        per_mma = not self.use_fast_accum
        split = bool(self.k_cuts) and self.k_cuts[0].layout == "contiguous"
        if split:
            return "splitk_per_mma" if per_mma else "splitk"
        return "per_mma" if per_mma else "single_pass"
