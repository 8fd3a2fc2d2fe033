"""The cuBLASLt split-K tail loss (paper App. D): the condition, its data, and the reproducer.

With all-ones inputs and an fp32 output every element of C must equal K exactly, so what comes
back counts the k terms that were summed. On some shapes the nvjet split-K path (ALGO_ID 66)
returns K - t: it splits q = floor(K/b) whole k steps of b evenly over s threadblocks and the
t = K mod b leftover terms belong to nobody. The condition: ALGO_ID 66, t != 0, q mod s == 0 and
s > t. The k step b is data (matrices/cublas_bugs/k_steps.yaml), the shapes each library is known
to lose on are data (matrices/cublas_bugs/*.yaml), and torch is imported only by the GPU parts.

The span rule (measured on an H200 with cuBLASLt 13.1.0, see matrices/cublas_bugs/): each of the
s parts spans floor(K/s) terms, rounded up to whole k steps unless it already is whole; when it
is whole, the parts end at s·floor(K/s) and r = K mod (b·s) terms are lost, which happens exactly
when 0 < r < s. For s <= b this is the paper's condition (r = t); past s = b the loss can exceed
b (K = 114008, s = 89 loses 88 = 64 + 24), which the paper's condition does not predict.
"""

from __future__ import annotations

import fnmatch
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parents[2] / "matrices" / "cublas_bugs"
DEFAULT_ALGO_IDS: tuple[int, ...] = (66,)
# the predictors a sweep scores: the paper's four clauses, the span rule, each without ALGO_ID
VARIANTS: tuple[str, ...] = ("paper", "paper_no_algo", "span", "span_no_algo")
GATED_VARIANT = "span"  # what the gate holds the library to (it contains the paper's cases)
HEURISTIC_FIELDS = (
    "algo_id",
    "tile_id",
    "splitk_num",
    "reduction_scheme",
    "cta_swizzling",
    "custom_option",
    "stages_id",
)


class BugDataError(ValueError):
    """A matrices/cublas_bugs file is malformed; the message names the file and key."""


# ---------------------------------------------------------------------------------------------
# The condition


@dataclass(frozen=True)
class TailPrediction:
    """The four clauses for one (K, b, s, ALGO_ID) and what they predict."""

    k: int
    k_step: int
    splitk_num: int
    algo_id: int | None
    algo_ids: tuple[int, ...] = DEFAULT_ALGO_IDS

    @property
    def q(self) -> int:
        return self.k // self.k_step

    @property
    def t(self) -> int:
        return self.k % self.k_step

    @property
    def algo_clause(self) -> bool:
        return self.algo_id in self.algo_ids

    @property
    def arithmetic_clauses(self) -> bool:
        s = self.splitk_num
        return self.t != 0 and s >= 1 and self.q % s == 0 and s > self.t

    @property
    def lost(self) -> int:
        """Terms expected lost under the full condition (with the ALGO_ID clause)."""
        return self.t if self.algo_clause and self.arithmetic_clauses else 0

    @property
    def lost_without_algo(self) -> int:
        """Terms expected lost when the ALGO_ID clause is dropped (for the sweep statistics)."""
        return self.t if self.arithmetic_clauses else 0

    @property
    def span_residue(self) -> int:
        """r = K mod (b·s): what whole parts of floor(K/s) terms leave over when that span is whole."""
        return self.k % (self.k_step * self.splitk_num) if self.splitk_num >= 1 else 0

    @property
    def span_clauses(self) -> bool:
        """floor(K/s) is a whole number of k steps and does not reach K: 0 < K mod (b·s) < s."""
        return self.splitk_num >= 1 and 0 < self.span_residue < self.splitk_num

    @property
    def lost_span(self) -> int:
        """Terms expected lost under the span rule with the ALGO_ID clause."""
        return self.span_residue if self.algo_clause and self.span_clauses else 0

    @property
    def lost_span_without_algo(self) -> int:
        return self.span_residue if self.span_clauses else 0

    def predicted(self, variant: str) -> int:
        """The loss one of VARIANTS predicts."""
        if variant not in VARIANTS:
            raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")
        return {
            "paper": self.lost,
            "paper_no_algo": self.lost_without_algo,
            "span": self.lost_span,
            "span_no_algo": self.lost_span_without_algo,
        }[variant]

    def explain(self) -> str:
        return (
            f"K={self.k} b={self.k_step} q={self.q} t={self.t} s={self.splitk_num} algo={self.algo_id}: "
            f"algo in {list(self.algo_ids)}={self.algo_clause}, t!=0={self.t != 0}, "
            f"q mod s==0={self.splitk_num >= 1 and self.q % self.splitk_num == 0}, s>t={self.splitk_num > self.t}"
            f" -> lost {self.lost} (without the ALGO_ID clause: {self.lost_without_algo}); "
            f"span rule: K mod (b*s)={self.span_residue} -> lost {self.lost_span}"
        )


def tail_condition(
    k: int,
    k_step: int,
    splitk_num: int,
    algo_id: int | None = None,
    *,
    algo_ids: tuple[int, ...] = DEFAULT_ALGO_IDS,
) -> TailPrediction:
    for name, v in (("k", k), ("k_step", k_step)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={v!r} must be a positive integer")
    if not isinstance(splitk_num, int) or splitk_num < 0:
        raise ValueError(f"splitk_num={splitk_num!r} must be a non-negative integer")
    return TailPrediction(k, k_step, splitk_num, algo_id, tuple(algo_ids))


def expected_loss(
    answer: Any,
    k: int,
    k_step: int,
    splitk_num: int | None = None,
    *,
    require_algo_id: bool = True,
    algo_ids: tuple[int, ...] = DEFAULT_ALGO_IDS,
    rule: str = "paper",
) -> int:
    """Terms of K expected lost for a heuristic answer (anything with algo_id/splitk_num);
    ``rule`` is 'paper' (the four clauses) or 'span' (the span rule)."""
    if rule not in ("paper", "span"):
        raise ValueError(f"rule {rule!r} is not one of paper, span")
    s = int(answer.splitk_num) if splitk_num is None else splitk_num
    pred = tail_condition(k, k_step, s, int(answer.algo_id), algo_ids=algo_ids)
    return pred.predicted(rule if require_algo_id else f"{rule}_no_algo")


@dataclass(frozen=True)
class Confusion:
    """Predicted vs observed losses over a sweep; ``wrong_amount`` counts losses of another size."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    wrong_amount: int = 0

    def add(self, predicted: int, observed: int) -> Confusion:
        if predicted and observed:
            return replace(self, tp=self.tp + 1, wrong_amount=self.wrong_amount + (predicted != observed))
        if predicted:
            return replace(self, fp=self.fp + 1)
        if observed:
            return replace(self, fn=self.fn + 1)
        return replace(self, tn=self.tn + 1)

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def exact(self) -> bool:
        return self.fp == 0 and self.fn == 0 and self.wrong_amount == 0

    def as_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn, "wrong_amount": self.wrong_amount}


# ---------------------------------------------------------------------------------------------
# Data: k steps, case files, sweep spec


@dataclass(frozen=True)
class KSteps:
    entries: tuple[tuple[str, str, int, tuple[int, ...]], ...]  # (arch, in_dtype, k_step, tile_ids)
    condition_algo_ids: tuple[int, ...]
    overrides: tuple[tuple[str, str, int, int], ...] = ()  # (arch, in_dtype, tile_id, k_step)

    def lookup(self, arch: str, in_dtype: str, tile_id: int | None = None) -> int:
        for a, d, tid, step in self.overrides:
            if (a, d, tid) == (arch, in_dtype, tile_id):
                return step
        for a, d, step, _ in self.entries:
            if (a, d) == (arch, in_dtype):
                return step
        known = ", ".join(f"{a}/{d}" for a, d, _, _ in self.entries)
        raise KeyError(f"no k step for arch={arch} in_dtype={in_dtype} in k_steps.yaml; known: {known}")


def _int(value: Any, where: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BugDataError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def parse_k_steps(data: Any, where: str = "k_steps.yaml") -> KSteps:
    if not isinstance(data, dict) or not isinstance(data.get("k_steps"), list):
        raise BugDataError(f"{where}: expected a mapping with a k_steps list")
    entries = []
    overrides = []
    for i, e in enumerate(data["k_steps"]):
        w = f"{where}: k_steps[{i}]"
        if not isinstance(e, dict):
            raise BugDataError(f"{w}: expected a mapping")
        for key in ("arch", "in_dtype"):
            if not isinstance(e.get(key), str):
                raise BugDataError(f"{w}.{key}: missing or not a string")
        step = _int(e.get("k_step"), f"{w}.k_step", minimum=1)
        entries.append((e["arch"], e["in_dtype"], step, ()))
        for tid, tstep in (e.get("tile_ids") or {}).items():
            overrides.append(
                (
                    e["arch"],
                    e["in_dtype"],
                    _int(tid, f"{w}.tile_ids"),
                    _int(tstep, f"{w}.tile_ids.{tid}", minimum=1),
                )
            )
    algo_ids = data.get("condition_algo_ids", list(DEFAULT_ALGO_IDS))
    if not isinstance(algo_ids, list) or not algo_ids:
        raise BugDataError(f"{where}: condition_algo_ids must be a non-empty list of integers")
    return KSteps(
        tuple(entries), tuple(_int(a, f"{where}: condition_algo_ids") for a in algo_ids), tuple(overrides)
    )


def load_k_steps(path: Path | None = None) -> KSteps:
    p = path or DATA_DIR / "k_steps.yaml"
    with open(p) as fh:
        return parse_k_steps(yaml.safe_load(fh), where=str(p))


@dataclass(frozen=True)
class TailCase:
    m: int
    n: int
    k: int
    in_dtype: str
    expected_lost: int
    heuristic: tuple[tuple[str, int], ...] = ()
    torch_mm_out_fp32_lost: int | None = None
    torch_mm_fp16_value: float | None = None
    note: str = ""

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    def heuristic_mismatch(self, answer: Any) -> list[str]:
        """Recorded heuristic fields that differ from a live answer ("field: recorded -> now")."""
        return [
            f"{f}: {v} -> {getattr(answer, f)}" for f, v in self.heuristic if int(getattr(answer, f)) != v
        ]


@dataclass(frozen=True)
class CaseFile:
    arch: str
    library: str
    library_version: str  # exact "13.1.0" or an fnmatch pattern "13.1.*"
    source: str
    workspace_bytes: int
    cases: tuple[TailCase, ...]
    where: str = field(default="", compare=False)

    def matches(self, arch: str, version: str) -> bool:
        return arch == self.arch and fnmatch.fnmatchcase(version, self.library_version)


_IN_DTYPES = ("fp16", "bf16")


def parse_case_file(data: Any, where: str) -> CaseFile:
    if not isinstance(data, dict):
        raise BugDataError(f"{where}: expected a mapping")
    for key in ("arch", "library", "library_version", "source"):
        if not isinstance(data.get(key), str):
            raise BugDataError(f"{where}: {key} is missing or not a string")
    if data["library"] != "cublasLt":
        raise BugDataError(f"{where}: library={data['library']!r}; supported: cublasLt")
    ws = _int(data.get("workspace_bytes"), f"{where}: workspace_bytes", minimum=1)
    raw = data.get("cases")
    if not isinstance(raw, list) or not raw:
        raise BugDataError(f"{where}: cases must be a non-empty list")
    cases = []
    known = {
        "m",
        "n",
        "k",
        "in_dtype",
        "expected_lost",
        "heuristic",
        "torch_mm_out_fp32_lost",
        "torch_mm_fp16_value",
        "note",
    }
    for i, c in enumerate(raw):
        w = f"{where}: cases[{i}]"
        if not isinstance(c, dict):
            raise BugDataError(f"{w}: expected a mapping")
        unknown = sorted(set(c) - known)
        if unknown:
            raise BugDataError(f"{w}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        m, n, k = (_int(c.get(x), f"{w}.{x}", minimum=1) for x in ("m", "n", "k"))
        if c.get("in_dtype") not in _IN_DTYPES:
            raise BugDataError(f"{w}.in_dtype: {c.get('in_dtype')!r} is not one of {', '.join(_IN_DTYPES)}")
        lost = _int(c.get("expected_lost"), f"{w}.expected_lost")
        if lost >= k:
            raise BugDataError(f"{w}.expected_lost: {lost} is not below K={k}")
        heur = c.get("heuristic") or {}
        if not isinstance(heur, dict) or any(f not in HEURISTIC_FIELDS for f in heur):
            raise BugDataError(
                f"{w}.heuristic: keys must be among {', '.join(HEURISTIC_FIELDS)}, got {heur!r}"
            )
        tl = c.get("torch_mm_out_fp32_lost")
        tv = c.get("torch_mm_fp16_value")
        cases.append(
            TailCase(
                m,
                n,
                k,
                c["in_dtype"],
                lost,
                tuple((f, _int(v, f"{w}.heuristic.{f}")) for f, v in heur.items()),
                None if tl is None else _int(tl, f"{w}.torch_mm_out_fp32_lost"),
                None if tv is None else float(tv),
                str(c.get("note", "")),
            )
        )
    return CaseFile(
        data["arch"], data["library"], data["library_version"], data["source"], ws, tuple(cases), where
    )


def load_case_files(directory: Path | None = None) -> tuple[CaseFile, ...]:
    """Every case document under matrices/cublas_bugs (a file holds one, or a `documents` list)."""
    d = directory or DATA_DIR
    out = []
    for path in sorted(d.glob("*.yaml")):
        if path.name in ("k_steps.yaml", "sweep.yaml"):
            continue
        with open(path) as fh:
            data = yaml.safe_load(fh)
        if isinstance(data, dict) and "documents" in data:
            docs = data["documents"]
            if not isinstance(docs, list):
                raise BugDataError(f"{path}: documents must be a list")
            out += [parse_case_file(doc, f"{path}: documents[{i}]") for i, doc in enumerate(docs)]
        else:
            out.append(parse_case_file(data, str(path)))
    return tuple(out)


def cases_for(arch: str, version: str, files: tuple[CaseFile, ...] | None = None) -> tuple[CaseFile, ...]:
    return tuple(f for f in (files if files is not None else load_case_files()) if f.matches(arch, version))


@dataclass(frozen=True)
class SweepSpec:
    seed: int
    in_dtypes: tuple[str, ...]
    mn: tuple[tuple[int, int], ...]
    k_grid: tuple[int, int, int]
    k_deep: tuple[int, int, int] | None
    random_count: int
    random_limits: tuple[int, int, int, int]  # m_max, n_max, k_max, k_multiple
    others_per_mn: int
    budget_s: float = 300.0
    deep_random_per_mn: int = 0  # seeded random K in the deep range per (M, N): splits past 64 live there

    def deep_random_ks(self, m: int, n: int) -> list[int]:
        if not self.k_deep or not self.deep_random_per_mn:
            return []
        start, stop, _ = self.k_deep
        rng = random.Random(self.seed * 1_000_003 + m * 4099 + n)
        return sorted({rng.randrange(start, stop, 8) for _ in range(self.deep_random_per_mn)})

    def grid_shapes(self) -> list[tuple[int, int, int]]:
        ks = list(range(*self.k_grid)) + (list(range(*self.k_deep)) if self.k_deep else [])
        return [(m, n, k) for m, n in self.mn for k in sorted(set(ks + self.deep_random_ks(m, n)))]

    def random_shapes(self) -> list[tuple[int, int, int]]:
        rng = random.Random(self.seed)
        m_max, n_max, k_max, mult = self.random_limits
        out = []
        for _ in range(self.random_count):
            m = int(round(2 ** rng.uniform(0, max(0.0, (m_max).bit_length() - 1))))
            n = int(round(2 ** rng.uniform(0, max(0.0, (n_max).bit_length() - 1))))
            k = rng.randrange(mult, k_max + 1, mult)
            out.append((max(1, min(m, m_max)), max(1, min(n, n_max)), k))
        return out

    def shapes(self) -> list[tuple[int, int, int]]:
        return self.grid_shapes() + self.random_shapes()


def _range3(value: Any, where: str) -> tuple[int, int, int]:
    if not isinstance(value, dict):
        raise BugDataError(f"{where}: expected {{start, stop, step}}")
    r = tuple(_int(value.get(x), f"{where}.{x}", minimum=1) for x in ("start", "stop", "step"))
    if r[0] >= r[1]:
        raise BugDataError(f"{where}: start {r[0]} must be below stop {r[1]}")
    return r  # type: ignore[return-value]


def parse_sweep(data: Any, where: str = "sweep.yaml", *, quick: bool = False) -> SweepSpec:
    if not isinstance(data, dict):
        raise BugDataError(f"{where}: expected a mapping")
    base = dict(data)
    if quick:
        q = data.get("quick")
        if not isinstance(q, dict):
            raise BugDataError(f"{where}: quick must be a mapping")
        base.update(q)
        if "k_deep" not in q:
            base["k_deep"] = None
    mn = base.get("mn")
    if not isinstance(mn, list) or not mn or not all(isinstance(p, list) and len(p) == 2 for p in mn):
        raise BugDataError(f"{where}: mn must be a list of [M, N] pairs")
    dts = base.get("in_dtypes", ["fp16"])
    if not isinstance(dts, list) or any(d not in _IN_DTYPES for d in dts):
        raise BugDataError(f"{where}: in_dtypes must be a list among {', '.join(_IN_DTYPES)}")
    rs = base.get("random_shapes") or {"count": 0, "m_max": 1, "n_max": 1, "k_max": 8, "k_multiple": 8}
    limits = tuple(
        _int(rs.get(x), f"{where}: random_shapes.{x}", minimum=1)
        for x in ("m_max", "n_max", "k_max", "k_multiple")
    )
    return SweepSpec(
        seed=_int(base.get("seed"), f"{where}: seed"),
        in_dtypes=tuple(dts),
        mn=tuple((_int(p[0], f"{where}: mn", minimum=1), _int(p[1], f"{where}: mn", minimum=1)) for p in mn),
        k_grid=_range3(base.get("k_grid"), f"{where}: k_grid"),
        k_deep=None if base.get("k_deep") is None else _range3(base.get("k_deep"), f"{where}: k_deep"),
        random_count=_int(rs.get("count"), f"{where}: random_shapes.count"),
        random_limits=limits,  # type: ignore[arg-type]
        others_per_mn=_int(base.get("others_per_mn"), f"{where}: others_per_mn"),
        budget_s=float(_int(base.get("suite_budget_s", 300), f"{where}: suite_budget_s", minimum=1)),
        deep_random_per_mn=_int(base.get("deep_random_per_mn", 0), f"{where}: deep_random_per_mn"),
    )


def load_sweep(path: Path | None = None, *, quick: bool = False) -> SweepSpec:
    p = path or DATA_DIR / "sweep.yaml"
    with open(p) as fh:
        return parse_sweep(yaml.safe_load(fh), where=str(p), quick=quick)


# ---------------------------------------------------------------------------------------------
# GPU reproducer (torch imported inside)


@dataclass(frozen=True)
class OnesResult:
    """What an all-ones GEMM returned: the value of C (uniform over C when the bug is uniform)."""

    path: str
    out_dtype: str
    value: float
    min: float
    max: float
    error: str | None = None

    @property
    def uniform(self) -> bool:
        return self.min == self.max

    def lost(self, k: int) -> int | None:
        """K minus the value, for an exact (fp32) output; None where the output rounds or failed."""
        if self.error or self.out_dtype != "fp32" or not self.uniform:
            return None
        return int(k - self.value)


def _summary(path: str, out_dtype: str, c: Any) -> OnesResult:
    f = c.float()
    return OnesResult(
        path, out_dtype, float(f.flatten()[0].item()), float(f.min().item()), float(f.max().item())
    )


def ones_inputs(m: int, n: int, k: int, in_dtype: str) -> tuple[Any, Any]:
    import torch

    from fixbits.cublas.torch_dtypes import torch_dtype

    dt = torch_dtype(in_dtype)
    return torch.ones(m, k, dtype=dt, device="cuda"), torch.ones(k, n, dtype=dt, device="cuda")


def ones_lt(
    lt: Any,
    m: int,
    n: int,
    k: int,
    in_dtype: str,
    *,
    workspace_bytes: int,
    algo: Any = None,
    out_dtype: str = "fp32",
    path: str | None = None,
    pool: Any = None,
) -> OnesResult:
    a, b = (pool.get(m, k, in_dtype), pool.get(k, n, in_dtype)) if pool else ones_inputs(m, n, k, in_dtype)
    c = lt.matmul(a, b, out_dtype, algo=algo, workspace_bytes=workspace_bytes)
    return _summary(path or ("lt-own" if algo is None else "lt-heuristic"), out_dtype, c)


def ones_torch(m: int, n: int, k: int, in_dtype: str, how: str, pool: Any = None) -> OnesResult:
    """how: 'mm' (output in the input dtype), 'mm_out_fp32' (out_dtype=float32), 'matmul'."""
    import torch

    a, b = (pool.get(m, k, in_dtype), pool.get(k, n, in_dtype)) if pool else ones_inputs(m, n, k, in_dtype)
    if how == "mm":
        c, out = torch.mm(a, b), in_dtype
    elif how == "mm_out_fp32":
        c, out = torch.mm(a, b, out_dtype=torch.float32), "fp32"
    elif how == "matmul":
        c, out = torch.matmul(a, b), in_dtype
    else:
        raise ValueError(f"how={how!r} is not one of mm, mm_out_fp32, matmul")
    torch.cuda.synchronize()
    return _summary(f"torch.{how}", out, c)


def rounded(value: float, dtype: str) -> float:
    """``value`` as the output dtype stores it (what an all-ones GEMM of that output must read)."""
    import ml_dtypes
    import numpy as np

    npd = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    with np.errstate(over="ignore"):  # K past the fp16 range reads inf, as the GPU's fp16 output does
        return float(np.asarray(value, dtype=np.float64).astype(npd))


def device_arch() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


@dataclass(frozen=True)
class Reproduction:
    """Everything `fixbits bug splitk-tail` reports for one shape."""

    m: int
    n: int
    k: int
    in_dtype: str
    arch: str
    library_version: str
    library_path: str | None
    heuristic: Any
    prediction: TailPrediction
    results: tuple[OnesResult, ...]

    def result(self, path: str) -> OnesResult | None:
        return next((r for r in self.results if r.path == path), None)


def _guard(fn: Any, path: str, out_dtype: str) -> OnesResult:
    try:
        return fn()  # type: ignore[no-any-return]
    except Exception as exc:  # one failing path must not hide the others
        return OnesResult(
            path, out_dtype, float("nan"), float("nan"), float("nan"), f"{type(exc).__name__}: {exc}"
        )


def reproduce(
    m: int,
    n: int,
    k: int,
    in_dtype: str = "fp16",
    *,
    lt: Any = None,
    workspace_bytes: int = 32 * 1024 * 1024,
    k_step: int | None = None,
    k_steps: KSteps | None = None,
) -> Reproduction:
    """Run the all-ones GEMM every way that matters: cuBLASLt own pick with a workspace (the bug),
    the heuristic's algo explicitly, the zero-workspace control (no split, stays whole) and torch."""
    from fixbits.cublas.lt import CublasLt

    lt = lt or CublasLt()
    arch = device_arch()
    answer = lt.heuristic(m, n, k, in_dtype, "fp32", workspace_bytes=workspace_bytes)
    ks = k_steps or load_k_steps()
    b = k_step if k_step is not None else ks.lookup(arch, in_dtype, answer.tile_id)
    pred = tail_condition(k, b, answer.splitk_num, answer.algo_id, algo_ids=ks.condition_algo_ids)
    results = (
        _guard(
            lambda: ones_lt(lt, m, n, k, in_dtype, workspace_bytes=workspace_bytes, path="lt-own"),
            "lt-own",
            "fp32",
        ),
        _guard(
            lambda: ones_lt(
                lt, m, n, k, in_dtype, workspace_bytes=workspace_bytes, algo=answer, path="lt-heuristic"
            ),
            "lt-heuristic",
            "fp32",
        ),
        _guard(
            lambda: ones_lt(lt, m, n, k, in_dtype, workspace_bytes=0, path="lt-own-no-workspace"),
            "lt-own-no-workspace",
            "fp32",
        ),
        _guard(lambda: ones_torch(m, n, k, in_dtype, "mm"), "torch.mm", in_dtype),
        _guard(lambda: ones_torch(m, n, k, in_dtype, "mm_out_fp32"), "torch.mm_out_fp32", "fp32"),
        _guard(lambda: ones_torch(m, n, k, in_dtype, "matmul"), "torch.matmul", in_dtype),
    )
    return Reproduction(m, n, k, in_dtype, arch, lt.version_str, lt.library_path, answer, pred, results)


class OnesPool:
    """All-ones device buffers reused across a sweep: A and B are views of one ones vector per
    dtype, so a sweep of thousands of shapes does not allocate thousands of tensors."""

    def __init__(self) -> None:
        self._bufs: dict[str, Any] = {}

    def get(self, rows: int, cols: int, in_dtype: str) -> Any:
        import torch

        from fixbits.cublas.torch_dtypes import torch_dtype

        need = rows * cols
        buf = self._bufs.get(in_dtype)
        if buf is None or buf.numel() < need:
            buf = torch.ones(max(need, 1 << 20), dtype=torch_dtype(in_dtype), device="cuda")
            self._bufs[in_dtype] = buf
        return buf[:need].view(rows, cols)


# ---------------------------------------------------------------------------------------------
# Sweep bookkeeping: the black box is two callables, so CPU tests drive it with a fake.


@dataclass(frozen=True)
class SweepRecord:
    m: int
    n: int
    k: int
    in_dtype: str
    answer: tuple[int, ...] | None  # HeuristicAnswer.key(), None if the heuristic failed
    k_step: int | None
    predicted: int  # the paper's four clauses
    predicted_without_algo: int
    observed: int | None  # None: not run (or failed, see error)
    error: str | None = None
    predicted_span: int = 0
    predicted_span_without_algo: int = 0

    @property
    def ran(self) -> bool:
        return self.observed is not None

    @property
    def flagged(self) -> bool:
        """Some variant predicts a loss here."""
        return bool(
            self.predicted
            or self.predicted_without_algo
            or self.predicted_span
            or self.predicted_span_without_algo
        )

    def prediction(self, variant: str) -> int:
        return {
            "paper": self.predicted,
            "paper_no_algo": self.predicted_without_algo,
            "span": self.predicted_span,
            "span_no_algo": self.predicted_span_without_algo,
        }[variant]


@dataclass(frozen=True)
class SweepResult:
    records: tuple[SweepRecord, ...]
    queried: int
    heuristic_errors: int
    run_errors: int
    out_of_time: bool

    def confusion(self, variant: str = GATED_VARIANT, *, in_dtype: str | None = None) -> Confusion:
        if variant not in VARIANTS:
            raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")
        c = Confusion()
        for r in self.records:
            if r.observed is None or (in_dtype and r.in_dtype != in_dtype):
                continue
            c = c.add(r.prediction(variant), r.observed)
        return c

    def mispredicted(self, variant: str = GATED_VARIANT) -> tuple[SweepRecord, ...]:
        return tuple(r for r in self.records if r.ran and r.observed != r.prediction(variant))

    @property
    def ran(self) -> int:
        return sum(r.ran for r in self.records)

    @property
    def losses(self) -> tuple[SweepRecord, ...]:
        return tuple(r for r in self.records if r.observed)

    @property
    def flagged(self) -> int:
        return sum(1 for r in self.records if r.flagged)


def run_sweep(
    shapes: list[tuple[int, int, int, str]],
    heuristic: Any,
    observe: Any,
    k_step_for: Any,
    *,
    seed: int,
    clock: Any,
    deadline: float,
    heuristic_share: float = 0.5,
    max_others: int | None = None,
    algo_ids: tuple[int, ...] = DEFAULT_ALGO_IDS,
) -> SweepResult:
    """Query the heuristic for every (M, N, K, dtype) (until ``heuristic_share`` of the time is
    spent), then run ``observe`` (all-ones GEMM -> terms lost) for every shape either variant of
    the condition flags, then for seeded random others until ``deadline`` on ``clock``.

    heuristic(m, n, k, dtype) -> answer; observe(m, n, k, dtype) -> int lost;
    k_step_for(dtype, answer) -> b. Exceptions in either are recorded per shape, never raised.
    """
    start = clock()
    h_deadline = start + (deadline - start) * heuristic_share
    queried: list[SweepRecord] = []
    h_err = 0
    out_of_time = False
    for m, n, k, dt in shapes:
        if clock() >= h_deadline:
            out_of_time = True
            break
        try:
            ans = heuristic(m, n, k, dt)
            b = int(k_step_for(dt, ans))
            pred = tail_condition(k, b, int(ans.splitk_num), int(ans.algo_id), algo_ids=algo_ids)
            queried.append(
                SweepRecord(
                    m,
                    n,
                    k,
                    dt,
                    tuple(ans.key()),
                    b,
                    pred.lost,
                    pred.lost_without_algo,
                    None,
                    predicted_span=pred.lost_span,
                    predicted_span_without_algo=pred.lost_span_without_algo,
                )
            )
        except Exception as exc:
            h_err += 1
            queried.append(
                SweepRecord(m, n, k, dt, None, None, 0, 0, None, f"heuristic: {type(exc).__name__}: {exc}")
            )
    flagged = [i for i, r in enumerate(queried) if r.answer is not None and r.flagged]
    others = [i for i, r in enumerate(queried) if r.answer is not None and not r.flagged]
    random.Random(seed).shuffle(others)
    if max_others is not None:
        others = others[:max_others]
    records = list(queried)
    run_err = 0
    for i in flagged + others:
        if clock() >= deadline:
            out_of_time = True
            break
        r = records[i]
        try:
            records[i] = replace(r, observed=int(observe(r.m, r.n, r.k, r.in_dtype)))
        except Exception as exc:
            run_err += 1
            records[i] = replace(r, error=f"run: {type(exc).__name__}: {exc}")
    return SweepResult(tuple(records), len(queried), h_err, run_err, out_of_time)


def summary_table(result: SweepResult, dtypes: tuple[str, ...]) -> str:
    """A fixed-width table: per dtype and overall, TP/FP/FN/TN of every predictor variant."""
    rows = [
        f"{'dtype':<6} {'predictor':<14} {'run':>7} {'lost':>6} {'TP':>6} {'FP':>6} {'FN':>6} {'TN':>7} {'amount!=':>8}"
    ]
    for dt in (*dtypes, None):
        for variant in VARIANTS:
            c = result.confusion(variant, in_dtype=dt)
            rows.append(
                f"{dt or 'all':<6} {variant:<14} {c.total:>7} {c.tp + c.fn:>6} "
                f"{c.tp:>6} {c.fp:>6} {c.fn:>6} {c.tn:>7} {c.wrong_amount:>8}"
            )
    return "\n".join(rows)


_INSTRUCTION = {"sm_80": "mma", "sm_90": "wgmma", "sm_100": "tcgen05", "sm_103": "tcgen05"}


def tail_dropped_desc(
    pred: TailPrediction, in_dtype: str, arch: str = "sm_90", out_dtype: str = "fp32"
) -> Any:
    """The GEMMDesc of a losing launch: s contiguous parts of floor(K/s) terms (whole k steps),
    the last one stopping at K - (K mod b·s) (KCut span_rule 'tail_dropped'), partials merged in
    fp32. This is what the arch profile records for a losing answer, so the emulator replays the
    loss on CPU."""
    from fixbits.desc import GEMMDesc, KCut

    if not pred.lost_span:
        raise ValueError(f"no tail is dropped here: {pred.explain()}")
    if arch not in _INSTRUCTION:
        raise ValueError(f"arch {arch!r} is not one of {', '.join(_INSTRUCTION)}")
    return GEMMDesc(
        arch=arch,
        instruction=_INSTRUCTION[arch],
        instruction_k=32 if in_dtype.startswith("fp8") else 16,
        in_dtype=in_dtype,
        out_dtype=out_dtype,
        k_loop_step=pred.k_step,
        k_cuts=(KCut("contiguous", count=pred.splitk_num, granule=pred.k_step, span_rule="tail_dropped"),),
    )
