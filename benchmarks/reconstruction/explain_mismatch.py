"""Re-emulate the sampled cells of the sweep's wrong-entry dumps with candidate descriptors.

The sweep (fixbits.probe.sweep) keeps, for every shape whose profile entry disagreed with
cuBLAS, the sampled cuBLAS cells and the seeds of its counter-hash draws. This script groups
the dumps by answer, varies the entry's descriptor along the axes a probe at one shape cannot
pin (split-K granule / aligned granule / span rule / merge, K-loop step and residue turn,
fast accumulation and promotion interval, instruction width) and reports which candidates
reproduce ALL sampled cells of ALL dumps of the answer bit for bit. Survivors are then held
against the entry's own verification shapes (from its note): cuBLAS's bytes there are not
stored, but the entry matched them, so a survivor that disagrees with the entry on those
shapes' draws is suspect and one that agrees structurally (same K partition) is safe.

    .venv/bin/python benchmarks/reconstruction/explain_mismatch.py \\
        benchmarks/reconstruction/h200/mismatch_s8/*.npz
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's fixbits, not an installed one

from fixbits.desc import _INSTRUCTION_K, GEMMDesc, KCut  # noqa: E402
from fixbits.emulate import emulate  # noqa: E402
from fixbits.numerics.formats import bits  # noqa: E402
from fixbits.probe import candidates as C  # noqa: E402
from fixbits.probe.hashdraw import numpy_cols, numpy_rows  # noqa: E402
from fixbits.probe.profile import PROFILE_DIR, find  # noqa: E402
from fixbits.probe.reconstruct import _step_variants  # noqa: E402
from fixbits.probe.sweep import draw_mismatches, sampled_operands  # noqa: E402

ALIGNED = (None, 64, 128, 256)


@dataclass
class Dump:
    """One wrong-entry dump: its meta, the rebuilt sampled operands and cuBLAS's cells."""

    path: Path
    meta: dict[str, Any]
    a: np.ndarray
    b: np.ndarray
    sizes: list[tuple[int, int]]
    got: np.ndarray

    @property
    def k(self) -> int:
        return int(self.meta["k"])

    def bad(self, desc: GEMMDesc) -> list[int]:
        return draw_mismatches(desc, self.a, self.b, self.sizes, self.got, self.meta["out_dtype"])[0]


def load_dump(path: Path) -> Dump:
    """The operands come from the stored arrays when present, else are redrawn from the seeds
    (the two agree bit for bit: fixbits.probe.hashdraw)."""
    z = np.load(path)
    meta = json.loads(str(z["meta"]))
    a, b, sizes = sampled_operands(meta)
    if "a_rows" in z.files and not np.array_equal(
        a.astype(np.float32).view(np.uint32), z["a_rows"].view(np.uint32)
    ):
        raise SystemExit(f"{path}: the redrawn rows differ from the stored ones")
    return Dump(path, meta, a, b, sizes, z["got"])


def split_variants(desc: GEMMDesc) -> list[GEMMDesc]:
    """The level-0 count cut with every granule, aligned granule, span rule and legal merge."""
    c0 = desc.k_cuts[0]
    merges = (
        ("chain", "butterfly_up", "butterfly_down")
        if c0.count and not c0.count & (c0.count - 1)
        else ("chain",)
    )
    out = []
    for g in C.GRANULES:
        for al in ALIGNED:
            if al is not None and al <= g:
                continue
            for rule in C.RULES:
                for merge in merges:
                    cut = KCut(
                        "contiguous",
                        count=c0.count,
                        granule=g,
                        span_rule=rule,
                        merge=merge,  # type: ignore[arg-type]
                        aligned_granule=al,
                    )
                    out.append(desc.replace(k_cuts=(cut,) + desc.k_cuts[1:]))
    return out


def order_variants(desc: GEMMDesc) -> list[GEMMDesc]:
    """K-loop step / residue turn (phase B's _step_variants), fast accumulation or promotion
    every 1..16 instructions, and every instruction width the hardware has for the dtype."""
    out: list[GEMMDesc] = []
    fam = "fp8" if desc.in_dtype.startswith("fp8") else "16bit"
    widths = [
        (i, k) for (i, f), ks in _INSTRUCTION_K.items() if f == fam and i in ("mma", "wgmma") for k in ks
    ]
    for instr, ik in widths:
        try:
            base = desc.replace(instruction=instr, instruction_k=ik)
        except Exception:  # noqa: BLE001  (a width the step does not allow)
            continue
        for d in _step_variants(base):
            for p in (None, *C.PROMOTIONS):
                try:
                    out.append(d.replace(use_fast_accum=p is None, promotion_interval=p))
                except Exception:  # noqa: BLE001
                    continue
    return list(dict.fromkeys(out))


def partition(desc: GEMMDesc, k: int) -> Any:
    """What the descriptor's K cut does at this K (two cuts with equal partitions and equal other
    fields give equal bytes)."""
    return tuple(tuple(map(tuple, p)) for p in desc.k_cuts[0].parts(k)) if desc.k_cuts else ()


def dedupe(cands: list[GEMMDesc], ks: list[int]) -> dict[Any, list[GEMMDesc]]:
    """Candidates grouped by (fields other than the cut, partitions at every K in ``ks``)."""
    groups: dict[Any, list[GEMMDesc]] = defaultdict(list)
    for d in cands:
        key = (d.replace(k_cuts=()).to_json(), tuple(partition(d, k) for k in ks))
        groups[key].append(d)
    return groups


def label(d: GEMMDesc, ref: GEMMDesc) -> str:
    """The fields where ``d`` departs from ``ref``."""
    a, b = d.to_dict(), ref.to_dict()
    parts = [f"{f}={a[f]}" for f in a if f != "k_cuts" and a[f] != b[f]]
    if d.k_cuts != ref.k_cuts and d.k_cuts:
        c = d.k_cuts[0]
        parts.append(
            f"split(count={c.count}, granule={c.granule}, aligned={c.aligned_granule}, rule={c.span_rule}, "
            f"merge={c.merge})"
        )
    return ", ".join(parts) or "the entry"


def screen(dumps: list[Dump], cands: list[GEMMDesc]) -> list[tuple[list[GEMMDesc], list[int]]]:
    """(equivalence class, total mismatches per dump) for every class of candidates; a class
    stops being emulated at its first failing dump."""
    out = []
    for members in dedupe(cands, [d.k for d in dumps]).values():
        res = []
        for dp in dumps:
            res.append(sum(dp.bad(members[0])))
            if res[-1]:
                break
        out.append((members, res + [-1] * (len(dumps) - len(res))))
    return out


def verification_shapes(note: str) -> list[tuple[int, int, int]]:
    m = re.search(r"verified by draws on (.*)", note.replace("\n", " "))
    if not m:
        return []
    return [tuple(int(x) for x in s.split("x")) for s in re.findall(r"\d+x\d+x\d+", m.group(1))]  # type: ignore[misc]


def phase_b_draws(
    shape: tuple[int, int, int], in_dtype: str, run_seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The sampled operands of the two draws phase B verified ``shape`` with (fixbits.probe.
    reconstruct._predict: verify_draws(seed=run_seed + 11 + K, draws=2) on a device backend, whose
    draw_sampled builds the hash draws 2s and 2s + 1 for s = seed * 1000 + 2i)."""
    from fixbits.cublas.backend import cells_for
    from fixbits.probe.recover import _sample

    m, n, k = shape
    seed = run_seed + 11 + k
    rng = np.random.default_rng(seed)
    cells = cells_for(k, 8)
    out = []
    for i in range(2):
        kind = ("ordinary", "wide")[i % 2]
        rows, cols = _sample(m, cells, rng), _sample(n, cells, rng)
        s = (seed * 1000 + 2 * i) & 0x7FFF_FFFF
        out.append(
            (
                numpy_rows((m, k), rows, in_dtype, kind, 2 * s),
                numpy_cols((k, n), cols, in_dtype, kind, 2 * s + 1),
            )
        )
    return out


def agree_on(
    d1: GEMMDesc, d2: GEMMDesc, shape: tuple[int, int, int], in_dtype: str, run_seed: int = 0
) -> tuple[str, int]:
    """('structural', 0) when both cut K alike and differ nowhere else; else ('replay', cells
    where their emulations differ on phase B's own draws of this shape). The entry matched
    cuBLAS on those draws, so a candidate that differs there contradicts the recorded evidence
    (when the run used seed ``run_seed``: the runner's default is 0)."""
    m, n, k = shape
    if d1.replace(k_cuts=()) == d2.replace(k_cuts=()) and partition(d1, k) == partition(d2, k):
        return "structural", 0
    diff = 0
    for a, b in phase_b_draws(shape, in_dtype, run_seed):
        diff += int(
            (
                bits(np.ascontiguousarray(emulate(d1, a, b))) != bits(np.ascontiguousarray(emulate(d2, a, b)))
            ).sum()
        )
    return "replay", diff


def recorded_cases(path: Path, key: str) -> list[dict[str, Any]]:
    """The sweep's recorded cases of ``key`` (sampled cells with cuBLAS's own bytes): a
    ``sweep_samples`` directory of the device run, or a ``.json.gz`` of {key: [case, ...]}."""
    import gzip

    if path.is_dir():
        out = []
        for f in sorted(path.glob("*.json.gz")):
            with gzip.open(f, "rt") as fh:
                out += [r for r in json.load(fh) if r.get("key") == key]
        return out
    with gzip.open(path, "rt") as fh:
        return list(json.load(fh).get(key, []))


def misses_on(desc: GEMMDesc, recs: list[dict[str, Any]]) -> list[str]:
    """The recorded cases where ``desc`` disagrees with cuBLAS's recorded cells."""
    from fixbits.probe.sweep import check_one

    return [f"{r['m']}x{r['n']}x{r['k']}" for r in recs if check_one(r, desc.to_dict(), None)["mismatches"]]


def explain(
    key: str,
    dumps: list[Dump],
    profile_dir: Path,
    recorded: Path | None = None,
    log: Any = print,
) -> dict[str, Any]:
    meta = dumps[0].meta
    prof = find("sm_90", "130100", meta["dtype"], meta["out_dtype"], profile_dir)
    entry = prof.entries.get(
        key
    )  # None once the answer was moved to `failed`: the dump holds the run's entry
    ref = GEMMDesc.from_dict(meta["desc"])
    log(
        f"== {key} ({meta['dtype']}->{meta['out_dtype']}): {len(dumps)} dump(s) "
        + ", ".join(f"{d.meta['m']}x{d.meta['n']}x{d.k}" for d in dumps)
    )
    log(f"   entry: {label(ref, ref)}; mismatches per dump: {[sum(d.bad(ref)) for d in dumps]}")
    cands: list[GEMMDesc] = [ref]
    if ref.k_cuts and ref.k_cuts[0].count:
        for s in split_variants(ref):
            cands.append(s)
        cands += order_variants(ref)
    else:
        cands += order_variants(ref)
    twins = []
    for other in ("fp32",) if meta["out_dtype"] != "fp32" else ():
        try:
            tw = find("sm_90", "130100", meta["dtype"], other, profile_dir).entries.get(key)
        except FileNotFoundError:
            tw = None
        if tw is not None:
            twins.append(tw.desc.replace(out_dtype=meta["out_dtype"]))
            cands.append(twins[-1])
            log(f"   the {meta['dtype']}->{other} entry of {key}: {label(twins[-1], ref)}")
    cands = list(dict.fromkeys(cands))
    results = screen(dumps, cands)
    fit = [(mem, r) for mem, r in results if all(x == 0 for x in r)]
    log(
        f"   {len(cands)} candidates in {len(results)} classes at these K; {len(fit)} class(es) fit every dump"
    )
    for mem, r in sorted(results, key=lambda t: sum(x for x in t[1] if x > 0) + 1000 * t[1].count(-1))[:12]:
        log(
            f"     {'FIT ' if all(x == 0 for x in r) else '    '}{r}  {label(mem[0], ref)}  (+{len(mem) - 1} equivalent)"
        )
    # a second pass: order variants on top of each fitting split class (the split alone may not pin them)
    if ref.k_cuts and fit:
        extra = []
        for mem, _ in fit:
            extra += [d for d in order_variants(mem[0]) if d not in cands]
        more = [(mem, r) for mem, r in screen(dumps, extra) if all(x == 0 for x in r)]
        log(
            f"   order variants of the fitting split classes: {len(extra)} tried, {len(more)} more class(es) fit"
        )
        fit += more
    shapes = verification_shapes(entry.note) if entry is not None else []
    recs = recorded_cases(recorded, key) if recorded else []
    if recorded:
        log(f"   {len(recs)} recorded sweep case(s) of {key} in {recorded.name} (cuBLAS's own sampled cells)")
    report: dict[str, Any] = {"key": key, "entry": ref.to_dict(), "fits": [], "verification_shapes": shapes}
    for mem, _ in fit:
        checks = {f"{m}x{n}x{k}": agree_on(mem[0], ref, (m, n, k), meta["dtype"]) for m, n, k in shapes}
        log(
            f"   fit: {label(mem[0], ref)} (+{len(mem) - 1} equivalent); vs the entry on its verification shapes: "
            + ", ".join(
                f"{s} {how}{'' if how == 'structural' else f' {n} cells differ'}"
                for s, (how, n) in checks.items()
            )
        )
        fit_rep: dict[str, Any] = {
            "desc": mem[0].to_dict(),
            "equivalent": [d.to_dict() for d in mem[1:]],
            "verification": checks,
        }
        if recs:
            fit_rep["recorded_misses"] = bad = misses_on(mem[0], recs)
            log(
                f"        disagrees with cuBLAS on {len(bad)} of the {len(recs)} recorded sweep cases"
                + (f": {', '.join(bad[:6])}" if bad else "")
            )
        report["fits"].append(fit_rep)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", nargs="+", type=Path, help="mismatch_*.npz files written by fixbits.probe.sweep")
    ap.add_argument(
        "--profiles", type=Path, default=PROFILE_DIR, help="profile directory (the entries' notes)"
    )
    ap.add_argument(
        "--recorded",
        type=Path,
        default=None,
        help="the run's recorded sweep cases (its sweep_samples dir, or mismatch_s8/recorded_cases.json.gz):"
        " a fit must match cuBLAS's recorded cells on every case of its answer",
    )
    ap.add_argument("--json", type=Path, default=None, help="write the survivors here")
    args = ap.parse_args(argv)
    by_key: dict[str, list[Dump]] = defaultdict(list)
    for p in args.dumps:
        d = load_dump(p)
        by_key[d.meta["key"]].append(d)
    reports = [
        explain(k, sorted(v, key=lambda d: d.k), args.profiles, args.recorded)
        for k, v in sorted(by_key.items())
    ]
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1, default=list))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
