"""GEMM shape sets: the realistic static set read from model widths, and seeded fuzz shapes.

A layer list never visits M = 1 with K in the hundreds of thousands, and a random sweep
almost never lands on the widths real models use; the suites need both. The realistic set
(paper §7.1, Table 1) is 390 (M, N, K) triples in seven layer groups, each carrying the model
it came from and the operation that follows it (the epilogue a fused kernel must reproduce).
It is DERIVED: ``matrices/shapes/models.yaml`` holds the model widths (paper Table 4) and the
rules (Appendix C); ``generate_realistic()`` turns them into the committed
``matrices/shapes/realistic.yaml``, and a unit test checks that the committed file is what
the generator makes and that each group matches Table 1's count and ranges.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fixbits.matrices import MATRICES_DIR, MatrixError, Reader

SHAPES_DIR = MATRICES_DIR / "shapes"
MODELS_FILE = SHAPES_DIR / "models.yaml"
REALISTIC_FILE = SHAPES_DIR / "realistic.yaml"
GROUPS: tuple[str, ...] = ("attention", "mlp_up", "mlp_down", "moe_up", "moe_down", "lm_head", "lora_b")
EPILOGUES: tuple[str, ...] = ("none", "residual", "silu_gate", "gelu", "relu", "scale", "scale+residual")
WIDTH_SOURCES: tuple[str, ...] = ("hidden", "ffn", "expert", "vocab", "qkv", "q", "mla_kv_b", "rank")


@dataclass(frozen=True, order=True)
class Shape:
    """One GEMM C[M, N] = A[M, K] @ B[K, N], where it comes from and what follows it."""

    m: int
    n: int
    k: int
    layer: str = "fuzz"  # a GROUPS name, or 'fuzz:<regime>'
    epilogue: str = "none"  # '+'-joined EPILOGUES kinds, applied in order; 'none' for a bare GEMM
    model: str = ""
    projection: str = ""

    @property
    def mnk(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def epilogue_ops(self) -> tuple[str, ...]:
        """('scale', 'residual') for 'scale+residual'; () for 'none'."""
        return () if self.epilogue == "none" else tuple(self.epilogue.split("+"))

    @property
    def max_elements(self) -> int:
        """The largest of the three operands, in elements (what a GPU memory cap bounds)."""
        return max(self.m * self.k, self.k * self.n, self.m * self.n)

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


# -- the realistic static set --------------------------------------------------------------


@dataclass(frozen=True)
class ModelDims:
    """One row of the paper's Table 4, plus our attention stand-ins (see models.yaml)."""

    name: str
    hidden: int
    ffn: int | None
    expert: int | None
    experts: int | None
    active: int | None
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    activation: str
    mla_kv_b: int | None = None
    logits_scale: bool = False

    def width(self, source: str) -> int | None:
        if source == "qkv":
            return (self.heads + 2 * self.kv_heads) * self.head_dim
        if source == "q":
            return self.heads * self.head_dim
        value = getattr(self, source)
        return None if value is None else int(value)


@dataclass(frozen=True)
class Table1Row:
    count: int
    m: tuple[int, int]
    n: tuple[int, int]
    k: tuple[int, int]


@dataclass(frozen=True)
class GroupRule:
    name: str
    label: str
    projections: tuple[tuple[str, str, str], ...]  # (projection, N source, K source)
    epilogue: tuple[tuple[str, str], ...]  # (projection, epilogue or 'activation'/'logits')
    tokens: tuple[int, ...]
    ranks: tuple[int, ...]
    table1: Table1Row


@dataclass(frozen=True)
class ShapeSpec:
    models: tuple[ModelDims, ...]
    groups: tuple[GroupRule, ...]
    table1_all: Table1Row


def _range(r: Reader, value: Any, key: str) -> tuple[int, int]:
    seq = r.sequence(value, key)
    if len(seq) != 2:
        raise r.error(key, f"expected [low, high], got {seq!r}")
    lo, hi = (r.integer(v, f"{key}[{i}]", minimum=1) for i, v in enumerate(seq))
    if lo > hi:
        raise r.error(key, f"low {lo} is above high {hi}")
    return lo, hi


def _row(r: Reader, value: Any, key: str) -> Table1Row:
    m = r.mapping(value, key)
    r.only_keys(m, ("count", "m", "n", "k"), key)
    return Table1Row(
        count=r.integer(r.get(m, "count", key), f"{key}.count", minimum=1),
        m=_range(r, r.get(m, "m", key), f"{key}.m"),
        n=_range(r, r.get(m, "n", key), f"{key}.n"),
        k=_range(r, r.get(m, "k", key), f"{key}.k"),
    )


def load_spec(path: Path | str = MODELS_FILE) -> ShapeSpec:
    """Read and validate models.yaml (errors name the file and the key)."""
    r = Reader(path)
    top = r.mapping(r.data, "(top level)")
    r.only_keys(top, ("models", "groups", "table1_all"), "")
    models = []
    model_keys = (
        "name",
        "hidden",
        "ffn",
        "expert",
        "experts",
        "active",
        "vocab",
        "attention",
        "activation",
        "mla_kv_b",
        "logits_scale",
    )
    for i, raw in enumerate(r.sequence(r.get(top, "models", ""), "models")):
        key = f"models[{i}]"
        m = r.mapping(raw, key)
        r.only_keys(m, model_keys, key)

        def opt(name: str, m: Mapping[str, Any] = m, key: str = key) -> int | None:
            v = m.get(name)
            return None if v is None else r.integer(v, f"{key}.{name}", minimum=1)

        att = r.mapping(r.get(m, "attention", key), f"{key}.attention")
        r.only_keys(att, ("heads", "kv_heads", "head_dim"), f"{key}.attention")
        models.append(
            ModelDims(
                name=str(r.get(m, "name", key)),
                hidden=r.integer(r.get(m, "hidden", key), f"{key}.hidden", minimum=1),
                ffn=opt("ffn"),
                expert=opt("expert"),
                experts=opt("experts"),
                active=opt("active"),
                vocab=r.integer(r.get(m, "vocab", key), f"{key}.vocab", minimum=1),
                heads=r.integer(r.get(att, "heads", f"{key}.attention"), f"{key}.attention.heads", minimum=1),
                kv_heads=r.integer(
                    r.get(att, "kv_heads", f"{key}.attention"), f"{key}.attention.kv_heads", minimum=1
                ),
                head_dim=r.integer(
                    r.get(att, "head_dim", f"{key}.attention"), f"{key}.attention.head_dim", minimum=1
                ),
                activation=r.choice(
                    r.get(m, "activation", key), ("silu_gate", "gelu", "relu"), f"{key}.activation"
                ),
                mla_kv_b=opt("mla_kv_b"),
                logits_scale=bool(m.get("logits_scale", False)),
            )
        )
    groups_raw = r.mapping(r.get(top, "groups", ""), "groups")
    groups = []
    for name, raw in groups_raw.items():
        key = f"groups.{name}"
        r.choice(name, GROUPS, key)
        g = r.mapping(raw, key)
        r.only_keys(g, ("label", "projections", "epilogue", "tokens", "ranks", "table1"), key)
        projs = []
        for pname, srcs in r.mapping(r.get(g, "projections", key), f"{key}.projections").items():
            pk = f"{key}.projections.{pname}"
            pair = r.sequence(srcs, pk)
            if len(pair) != 2:
                raise r.error(pk, f"expected [N source, K source], got {pair!r}")
            projs.append(
                (
                    str(pname),
                    r.choice(pair[0], WIDTH_SOURCES, f"{pk}[0]"),
                    r.choice(pair[1], WIDTH_SOURCES, f"{pk}[1]"),
                )
            )
        epi = r.mapping(r.get(g, "epilogue", key), f"{key}.epilogue")
        epilogue = []
        for pname, _, _ in projs:
            e = r.choice(
                r.get(epi, pname, f"{key}.epilogue"),
                (*EPILOGUES, "activation", "logits"),
                f"{key}.epilogue.{pname}",
            )
            epilogue.append((pname, e))
        tokens = tuple(
            r.integer(t, f"{key}.tokens[{i}]", minimum=1)
            for i, t in enumerate(r.sequence(r.get(g, "tokens", key), f"{key}.tokens"))
        )
        ranks = tuple(
            r.integer(t, f"{key}.ranks[{i}]", minimum=1)
            for i, t in enumerate(r.sequence(g.get("ranks", []), f"{key}.ranks"))
        )
        if any(s == "rank" for _, n, k in projs for s in (n, k)) and not ranks:
            raise r.error(f"{key}.ranks", "missing: a projection reads 'rank'")
        groups.append(
            GroupRule(
                str(name),
                str(g.get("label", name)),
                tuple(projs),
                tuple(epilogue),
                tokens,
                ranks,
                _row(r, r.get(g, "table1", key), f"{key}.table1"),
            )
        )
    missing = [g for g in GROUPS if g not in groups_raw]
    if missing:
        raise r.error("groups", f"missing group(s) {', '.join(missing)}")
    return ShapeSpec(tuple(models), tuple(groups), _row(r, r.get(top, "table1_all", ""), "table1_all"))


def _candidates(spec: ShapeSpec, rule: GroupRule) -> list[Shape]:
    """Every (model, projection, M[, rank]) shape the rule reads, inside Table 1's window, deduplicated."""
    row = rule.table1
    seen: set[tuple[int, int, int]] = set()
    out: list[Shape] = []
    epilogues = dict(rule.epilogue)
    for model in spec.models:
        for proj, n_src, k_src in rule.projections:
            ns = rule.ranks if n_src == "rank" else (model.width(n_src),)
            ks = rule.ranks if k_src == "rank" else (model.width(k_src),)
            epi = epilogues[proj]
            if epi == "activation":
                epi = model.activation
            elif epi == "logits":
                epi = "scale" if model.logits_scale else "none"
            for n in ns:
                for k in ks:
                    if n is None or k is None:  # the model has no such layer (dash in Table 4)
                        continue
                    if not (row.n[0] <= n <= row.n[1] and row.k[0] <= k <= row.k[1]):
                        continue
                    for m in rule.tokens:
                        if not row.m[0] <= m <= row.m[1] or (m, n, k) in seen:
                            continue
                        seen.add((m, n, k))
                        out.append(Shape(m, n, k, rule.name, epi, model.name, proj))
    return out


def _thin(cands: list[Shape], count: int, where: str) -> list[Shape]:
    """Keep ``count`` shapes: every dimension's extremes first, then an even stride over the rest."""
    if len(cands) < count:
        raise MatrixError(f"{where}: the rules give only {len(cands)} shapes, Table 1 needs {count}")
    keep: list[int] = []
    for dim in ("m", "n", "k"):
        values = [getattr(s, dim) for s in cands]
        for target in (min(values), max(values)):
            i = values.index(target)
            if i not in keep:
                keep.append(i)
    rest = [i for i in range(len(cands)) if i not in keep]
    need = count - len(keep)
    keep += [rest[(2 * j + 1) * len(rest) // (2 * need)] for j in range(need)] if need > 0 else []
    return [cands[i] for i in sorted(keep)]


def generate_realistic(spec: ShapeSpec | None = None) -> list[Shape]:
    """The realistic static set, derived from models.yaml (deterministic: same file, same list)."""
    spec = spec or load_spec()
    shapes: list[Shape] = []
    for rule in spec.groups:
        shapes += _thin(_candidates(spec, rule), rule.table1.count, f"{MODELS_FILE.name}: group {rule.name}")
    return shapes


def dump_realistic(shapes: Sequence[Shape]) -> str:
    header = (
        "# GENERATED by `fixbits shapes --regenerate` from matrices/shapes/models.yaml; do not edit.\n"
        "# The realistic static GEMM shape set: (M, N, K) with the layer group, the model it was read\n"
        "# from, the projection and the operation that follows it. C[M,N] = A[M,K] @ B[K,N].\n"
    )
    rows = [asdict(s) for s in shapes]
    body = "\n".join(
        "- {"
        + ", ".join(
            f"{k}: {v if isinstance(v, int) else yaml.safe_dump(v).strip().removesuffix('...').strip()}"
            for k, v in row.items()
        )
        + "}"
        for row in rows
    )
    return (
        header
        + f"count: {len(shapes)}\nshapes:\n"
        + "\n".join("  " + line for line in body.splitlines())
        + "\n"
    )


def load_realistic(path: Path | str = REALISTIC_FILE) -> list[Shape]:
    r = Reader(path)
    top = r.mapping(r.data, "(top level)")
    items = r.sequence(r.get(top, "shapes", ""), "shapes")
    out = []
    fields = ("m", "n", "k", "layer", "epilogue", "model", "projection")
    for i, raw in enumerate(items):
        key = f"shapes[{i}]"
        s = r.mapping(raw, key)
        r.only_keys(s, fields, key)
        out.append(
            Shape(
                m=r.integer(r.get(s, "m", key), f"{key}.m", minimum=1),
                n=r.integer(r.get(s, "n", key), f"{key}.n", minimum=1),
                k=r.integer(r.get(s, "k", key), f"{key}.k", minimum=1),
                layer=r.choice(r.get(s, "layer", key), GROUPS, f"{key}.layer"),
                epilogue=r.choice(r.get(s, "epilogue", key), EPILOGUES, f"{key}.epilogue"),
                model=str(s.get("model", "")),
                projection=str(s.get("projection", "")),
            )
        )
    if top.get("count") != len(out):
        raise r.error("count", f"says {top.get('count')} but the file lists {len(out)} shapes")
    return out


def realistic_shapes(mode: str = "full", *, layers: Iterable[str] | None = None) -> list[Shape]:
    """The committed realistic set; ``mode='quick'`` keeps 3 per group (smallest, median, largest)."""
    shapes = load_realistic()
    if layers is not None:
        wanted = tuple(layers)
        bad = [g for g in wanted if g not in GROUPS]
        if bad:
            raise ValueError(f"unknown layer group(s) {', '.join(bad)}; known: {', '.join(GROUPS)}")
        shapes = [s for s in shapes if s.layer in wanted]
    if mode == "full":
        return shapes
    if mode != "quick":
        raise ValueError(f"mode {mode!r} is not one of quick, full")
    out: list[Shape] = []
    for g in GROUPS:
        group = sorted((s for s in shapes if s.layer == g), key=lambda s: (s.m * s.n * s.k, s.mnk))
        if group:
            picks = {0, len(group) // 2, len(group) - 1}
            out += [group[i] for i in sorted(picks)]
    return out


# -- fuzz shapes ---------------------------------------------------------------------------

FUZZ_M_MAX = 120_000
FUZZ_N_MAX = 120_000
FUZZ_K_MIN, FUZZ_K_MAX = 8, 300_000
REGIMES: tuple[str, ...] = ("log_uniform", "skinny_m", "skinny_n", "gemv", "deep_k", "shallow_k", "odd")


def _log_uniform(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))))


def _draw(rng: np.random.Generator, regime: str) -> tuple[int, int, int]:
    lu = _log_uniform
    if regime == "log_uniform":
        return lu(rng, 1, FUZZ_M_MAX), lu(rng, 1, FUZZ_N_MAX), lu(rng, FUZZ_K_MIN, FUZZ_K_MAX)
    if regime == "skinny_m":  # decode-like: a handful of rows against a wide weight
        return lu(rng, 1, 16), lu(rng, 256, FUZZ_N_MAX), lu(rng, 256, FUZZ_K_MAX)
    if regime == "skinny_n":
        return lu(rng, 256, FUZZ_M_MAX), lu(rng, 1, 16), lu(rng, 256, FUZZ_K_MAX)
    if regime == "gemv":  # M = 1: the lane-tree and workspace GEMV families
        return 1, lu(rng, 1, FUZZ_N_MAX), lu(rng, 1024, FUZZ_K_MAX)
    if regime == "deep_k":  # small output, very long reduction: where split-K is chosen
        return lu(rng, 1, 512), lu(rng, 1, 512), lu(rng, 16_384, FUZZ_K_MAX)
    if regime == "shallow_k":
        return lu(rng, 64, FUZZ_M_MAX), lu(rng, 64, FUZZ_N_MAX), lu(rng, FUZZ_K_MIN, 128)
    # odd: K just off a multiple of the k-loop step (the tail cases), M and N anywhere
    step = int(rng.choice([16, 32, 64, 128]))
    k = max(FUZZ_K_MIN, lu(rng, 64, FUZZ_K_MAX) // step * step + int(rng.integers(1, step)))
    return lu(rng, 1, FUZZ_M_MAX), lu(rng, 1, FUZZ_N_MAX), min(k, FUZZ_K_MAX)


def _cap(m: int, n: int, k: int, max_elements: int | None) -> tuple[int, int, int]:
    """Shrink the largest dimension (keeping K >= 8) until every operand fits the cap."""
    if max_elements is None:
        return m, n, k
    while max(m * k, k * n, m * n) > max_elements:
        dims = {"m": m, "n": n, "k": k if k > FUZZ_K_MIN else 0}
        big = max(dims, key=lambda d: dims[d])
        if big == "m":
            m = max(1, m // 2)
        elif big == "n":
            n = max(1, n // 2)
        else:
            k = max(FUZZ_K_MIN, k // 2)
        if m == 1 and n == 1 and k == FUZZ_K_MIN:
            break
    return m, n, k


def fuzz_shapes(
    seed: int,
    count: int,
    *,
    max_elements: int | None = None,
    regimes: Sequence[str] = REGIMES,
    align: int = 1,
) -> list[Shape]:
    """``count`` shapes over the paper's fuzzing regimes, reproducible from ``seed``.

    Regimes rotate in order (so any prefix covers all of them); M, N up to 120,000 and K from 8
    to 300,000, log-uniform within each regime. ``max_elements`` bounds every operand (a GPU
    run stays within memory and time); ``align`` rounds N and K up to a multiple (fp8 needs 16).
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    bad = [r for r in regimes if r not in REGIMES]
    if bad or not regimes:
        raise ValueError(f"unknown regime(s) {', '.join(bad) or '(none given)'}; known: {', '.join(REGIMES)}")
    if max_elements is not None and max_elements < FUZZ_K_MIN:
        raise ValueError(f"max_elements must be at least {FUZZ_K_MIN}, got {max_elements}")
    rng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for i in range(count):
        regime = regimes[i % len(regimes)]
        m, n, k = _draw(rng, regime)
        if align > 1:
            n, k = -(-n // align) * align, -(-k // align) * align
        m, n, k = _cap(m, n, k, max_elements)
        out.append(Shape(m, n, k, layer=f"fuzz:{regime}", epilogue="none", model="fuzz"))
    return out


# -- sharding fuzz shapes over workers -------------------------------------------------------

FUZZ_ID_PREFIX = "fuzz"
_FUZZ_ID = re.compile(r"\[(?:[^\]]*-)?" + FUZZ_ID_PREFIX + r"(\d+)(?:-[^\]]*)?\]$")


def shard_of(index: int, workers: int) -> int:
    """The worker (0-based) that runs fuzz shape ``index``: round robin, fixed by the index alone."""
    if workers < 1 or index < 0:
        raise ValueError(f"shard_of({index}, {workers}): need index >= 0 and workers >= 1")
    return index % workers


def shard(count: int, worker: int, workers: int) -> range:
    """The indices of ``count`` fuzz shapes that ``worker`` of ``workers`` runs. Over all workers
    the shards are disjoint and their union is range(count); sizes differ by at most one."""
    if not 0 <= worker < workers:
        raise ValueError(f"worker {worker} is not in 0..{workers - 1}")
    return range(worker, max(count, 0), workers)


def fuzz_param_id(index: int) -> str:
    """The pytest id of fuzz shape ``index`` ('fuzz7'): how the xdist scheduler and `fixbits
    report --check-shapes` recognise a fuzz shape in a node id."""
    return f"{FUZZ_ID_PREFIX}{index}"


def fuzz_index_of(nodeid: str) -> int | None:
    """7 for 'suites/x.py::test_f[fp16-fuzz7]', None for an item that is not a fuzz shape."""
    m = _FUZZ_ID.search(nodeid)
    return int(m.group(1)) if m else None


# -- `fixbits shapes` ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "--fuzz", type=int, metavar="SEED", help="print a seeded fuzz set instead of the realistic set"
    )
    src.add_argument(
        "--regenerate", action="store_true", help="rebuild matrices/shapes/realistic.yaml from models.yaml"
    )
    src.add_argument(
        "--check",
        action="store_true",
        help="exit 1 unless realistic.yaml is what models.yaml generates and matches Table 1",
    )
    parser.add_argument("--count", type=int, default=20, help="fuzz shapes to draw (default 20)")
    parser.add_argument("--max-elements", type=int, default=None, help="cap on any operand's elements (fuzz)")
    parser.add_argument(
        "--layer", choices=GROUPS, action="append", help="only these layer groups (repeatable)"
    )
    parser.add_argument("--mode", choices=("full", "quick"), default="full", help="quick: 3 shapes per group")
    parser.add_argument("--format", choices=("table", "yaml", "csv"), default="table")


def table1_report(shapes: Sequence[Shape], spec: ShapeSpec) -> list[tuple[str, int, str, str, str, bool]]:
    """(group, count, M range, N range, K range, matches Table 1) per group and for 'all'."""

    def rng(vals: list[int]) -> tuple[int, int]:
        return (min(vals), max(vals)) if vals else (0, 0)

    def fmt(r: tuple[int, int]) -> str:
        return f"{r[0]:,}-{r[1]:,}"

    rows = []
    for rule in (*spec.groups, None):
        group = [s for s in shapes if rule is None or s.layer == rule.name]
        want = spec.table1_all if rule is None else rule.table1
        got = Table1Row(
            len(group), rng([s.m for s in group]), rng([s.n for s in group]), rng([s.k for s in group])
        )
        rows.append(
            ("all" if rule is None else rule.name, got.count, fmt(got.m), fmt(got.n), fmt(got.k), got == want)
        )
    return rows


def run(args: argparse.Namespace) -> int:
    if args.regenerate:
        shapes = generate_realistic()
        REALISTIC_FILE.write_text(dump_realistic(shapes))
        print(f"wrote {len(shapes)} shapes to {REALISTIC_FILE}")
        return _print_table1(shapes)
    if args.check:
        committed, generated = load_realistic(), generate_realistic()
        if committed != generated:
            print(f"{REALISTIC_FILE} is stale: run `fixbits shapes --regenerate`", file=sys.stderr)
            return 1
        return _print_table1(committed)
    if args.fuzz is not None:
        shapes = fuzz_shapes(args.fuzz, args.count, max_elements=args.max_elements)
    else:
        shapes = realistic_shapes(args.mode, layers=args.layer)
    if args.format == "yaml":
        print(yaml.safe_dump([asdict(s) for s in shapes], sort_keys=False), end="")
    elif args.format == "csv":
        print("m,n,k,layer,epilogue,model,projection")
        for s in shapes:
            print(f"{s.m},{s.n},{s.k},{s.layer},{s.epilogue},{s.model},{s.projection}")
    else:
        print(f"{'M':>7} {'N':>7} {'K':>7}  {'layer':<16} {'epilogue':<15} model")
        for s in shapes:
            print(
                f"{s.m:>7} {s.n:>7} {s.k:>7}  {s.layer:<16} {s.epilogue:<15} {s.model} {s.projection}".rstrip()
            )
        print(f"{len(shapes)} shapes")
    return 0


def _print_table1(shapes: Sequence[Shape]) -> int:
    rows = table1_report(shapes, load_spec())
    print(f"{'group':<10} {'count':>5}  {'M':<12} {'N':<16} {'K':<13} Table 1")
    for g, c, m, n, k, ok in rows:
        print(f"{g:<10} {c:>5}  {m:<12} {n:<16} {k:<13} {'ok' if ok else 'MISMATCH'}")
    return 0 if all(r[-1] for r in rows) else 1
