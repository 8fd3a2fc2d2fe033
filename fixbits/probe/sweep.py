"""The verification sweep: cuBLAS's bytes on realistic and fuzz shapes against the profiles.

Split in two so that the device call is bounded by the GPU, not by emulation:
``collect`` (device) draws each shape's operands with fixbits.probe.hashdraw, runs cuBLAS, and
keeps only sampled output cells (a few KB per shape); ``check`` (any CPU, in parallel, during
the device call or after it) rebuilds exactly the sampled rows of A and columns of B, emulates
them with the profile's descriptor (all draws of a shape in one emulate call: its cost grows
with K, hardly with the number of cells) and classifies every mismatch: the answer is not in
the profile, the split-K tail defect explains it, or the entry is wrong. Each mismatching
case leaves its sampled inputs and outputs in DIR/mismatch_dump/ for study on a CPU.
"""

from __future__ import annotations

import csv
import gzip
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DRAW_KINDS = ("ordinary", "wide")
# fp16 / bf16 outputs round away most one-ulp regroupings on ordinary and wide draws (a wrong
# K-loop step passes them): every third draw of theirs is a spike draw (fixbits.probe.spikes)
NARROW_DRAW_KINDS = ("ordinary", "wide", "spike")


def draw_kinds(out_dtype: str) -> tuple[str, ...]:
    from fixbits.probe.spikes import hides_ulps

    return NARROW_DRAW_KINDS if hides_ulps(out_dtype) else DRAW_KINDS


def device_operands(m: int, n: int, k: int, dtype: str, kind: str, sa: int, sb: int, device: str) -> tuple[Any, Any]:
    """A and B of one sweep draw on ``device`` (sampled_operands redraws their cells on the CPU)."""
    from fixbits.probe import spikes
    from fixbits.probe.hashdraw import operand

    base = spikes.base_kind(kind)
    return spikes.finish(kind, operand((m, k), dtype, base, sa, device), operand((k, n), dtype, base, sb, device),
                         sa, dtype)  # fmt: skip


@dataclass(frozen=True)
class Case:
    which: str  # realistic | fuzz | recheck
    m: int
    n: int
    k: int


def cases(fuzz: int, seed: int = 0) -> list[Case]:
    """The 390 realistic shapes and ``fuzz`` seeded fuzz shapes, interleaved, cheapest first
    within blocks of 200 (a short budget still covers both sets and leaves the huge ones last)."""
    from fixbits.shapes import fuzz_shapes, realistic_shapes

    real = [Case("realistic", s.m, s.n, s.k) for s in realistic_shapes()]
    fz = [Case("fuzz", s.m, s.n, s.k) for s in fuzz_shapes(seed, fuzz)]
    mixed: list[Case] = []
    for i in range(max(len(real), len(fz))):
        if i < len(real):
            mixed.append(real[i])
        if i < len(fz):
            mixed.append(fz[i])
    return sorted(mixed, key=lambda c: 0 if _elements(c) <= 2e8 else 1 if _elements(c) <= 2e9 else 2)


def answer_shapes(csv_paths: list[str], answers: list[str]) -> list[tuple[int, int, int]]:
    """Shapes earlier sweeps routed to these answers (every dash-separated part of one of
    ``answers`` occurs in the row's answer key; an item may list several, comma-separated), in
    file order, once each: a corrected entry is re-verified on the very shapes that showed it wrong."""
    from fixbits.probe.profile import key_selector

    selects = key_selector(answers)
    seen: dict[tuple[int, int, int], None] = {}
    for path in csv_paths:
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                if row["outcome"] != "too_large" and selects(row["answer"]):
                    seen[(int(row["m"]), int(row["n"]), int(row["k"]))] = None
    return list(seen)


def _elements(c: Case) -> int:
    return c.m * c.k + c.k * c.n


def cells_per_draw(k: int) -> int:
    return 8 if k <= 4096 else 4


def _sample(n: int, count: int, rng: np.random.Generator) -> list[int]:
    if n <= count:
        return list(range(n))
    return sorted(set(rng.choice(n, count - 2, replace=False).tolist()) | {0, n - 1})


def seeds(case_seed: int, d: int) -> tuple[int, int]:
    return (case_seed * 64 + 2 * d) & 0x7FFFFFFF, (case_seed * 64 + 2 * d + 1) & 0x7FFFFFFF


def collect(lt: Any, todo: list[Case], dtypes: list[str], out_dtype: str, draws: int, deadline: float,
            out_dir: Path, *, device: str = "cuda", matmul: Any = None, max_bytes: int = 40 << 30,
            log: Any = print, on_flush: Any = None, draw_seed: int = 0) -> dict[str, int]:
    """Run cuBLAS on every (case, dtype) until ``deadline``; write DIR/sweep_samples/*.json.

    ``draw_seed`` > 0 gives every case operands no earlier run drew (re-verifying a corrected
    entry on the shapes that exposed it must not replay the draws it was fitted to).

    One host sync per case (the sampled cells of all draws come back together). ``matmul``
    replaces lt.matmul (a CPU dry run passes the emulator)."""
    if not 0 <= draw_seed < 32:
        raise ValueError(f"draw_seed={draw_seed}: seeds() keeps 31 bits, so draw_seed is one of 0..31")
    import torch

    from fixbits.probe.profile import answer_key

    kinds = draw_kinds(out_dtype)
    mm = matmul or (lambda a, b: lt.matmul(a, b, out_dtype))
    d_out = out_dir / "sweep_samples"
    d_out.mkdir(parents=True, exist_ok=True)
    counts = {"cases": 0, "no_algorithm": 0, "too_large": 0, "errors": 0, "fp8_k": 0}
    buf: list[dict[str, Any]] = []
    chunk = 0

    def flush() -> None:
        nonlocal chunk
        if buf:
            name = d_out / f"{'-'.join(dtypes)}_{out_dtype}_{chunk:04d}.json.gz"
            name.write_bytes(gzip.compress(json.dumps(buf, separators=(",", ":")).encode(), 6))
            chunk += 1
            if on_flush is not None:
                on_flush(list(buf))
            buf.clear()

    t0 = time.time()
    for ci, c in enumerate(todo):
        if time.time() > deadline:
            break
        for dt in dtypes:
            if time.time() > deadline:
                break
            m, n, k = c.m, c.n, c.k
            if dt.startswith("fp8") and c.which == "fuzz":
                m, n, k = fp8_aligned(m, n, k)  # the same seeded draw, as cuBLASLt's fp8 path takes it
            rec: dict[str, Any] = {"dtype": dt, "out_dtype": out_dtype, "set": c.which, "m": m, "n": n,
                                   "k": k, "case": ci}
            if (m, n, k) != (c.m, c.n, c.k):
                rec["aligned_from"] = [c.m, c.n, c.k]
            if dt.startswith("fp8") and k % 16:
                counts["fp8_k"] += 1
                continue
            if 2 * (m * k + k * n) + 4 * m * n + 48 * (1 << 25) > max_bytes:
                counts["too_large"] += 1
                buf.append({**rec, "outcome": "too_large"})
                continue
            try:
                ans = lt.heuristic(m, n, k, dt, out_dtype)
                rec["key"] = answer_key(ans)
                rec["tail_loss"] = _tail_loss(ans, k)
                cs = ci + (draw_seed << 20)  # seeds() keeps 31 bits: 2**20 cases, draw_seed 0..31
                rng = np.random.default_rng(cs)
                cells = cells_per_draw(k)
                picks, got = [], []
                for d in range(draws):
                    sa, sb = seeds(cs, d)
                    a, b = device_operands(m, n, k, dt, kinds[d % len(kinds)], sa, sb, device)
                    out = mm(a, b)
                    del a, b
                    rows, cols = _sample(m, cells, rng), _sample(n, cells, rng)
                    ri = torch.tensor(rows, dtype=torch.int64, device=out.device)
                    cj = torch.tensor(cols, dtype=torch.int64, device=out.device)
                    got.append(out[ri][:, cj].float().flatten())
                    picks.append((rows, cols))
                    del out
                vals = torch.cat(got).cpu().numpy().astype(np.float32)  # one sync per case
                rec["draws"] = [{"kind": kinds[d % len(kinds)], "seeds": list(seeds(cs, d)), "rows": r, "cols": cc}
                                for d, (r, cc) in enumerate(picks)]
                rec["got"] = vals.view(np.uint32).tolist()
                counts["cases"] += 1
            except Exception as exc:  # noqa: BLE001  (one shape failing must not end the sweep)
                no_algo = type(exc).__name__ == "NoAlgorithmError"
                counts["no_algorithm" if no_algo else "errors"] += 1
                rec["outcome"] = "no_algorithm" if no_algo else "error"
                rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
            buf.append(rec)
            if len(buf) >= 50:
                flush()
    flush()
    log(f"sweep collect {out_dtype}: {counts} in {time.time() - t0:.0f}s")
    return counts


def fp8_aligned(m: int, n: int, k: int) -> tuple[int, int, int]:
    """A fuzz shape carried to what cuBLASLt's fp8 path accepts (K a multiple of 16, N of 4: the
    H200 run s6b found no algorithm for 94 of 118 unaligned draws); M is free."""
    return m, -(-n // 4) * 4, -(-k // 16) * 16


def _tail_loss(ans: Any, k: int) -> int:
    """Elements of K the split-K tail defect drops for this answer (fixbits.bugs.splitk_tail)."""
    try:
        from fixbits.bugs.splitk_tail import expected_loss

        return int(expected_loss(ans, k, 64) or 0)
    except Exception:  # noqa: BLE001  (no predicate for this answer)
        return 0


def load_samples(out_dir: Path) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for p in sorted((out_dir / "sweep_samples").glob("*.json*")):
        raw = p.read_bytes()
        recs += json.loads(gzip.decompress(raw) if p.suffix == ".gz" else raw)
    return recs


def _lookup(prof: Any, key: str, k: int, n: int | None = None) -> Any:
    """The profile's descriptor for (answer, K, orientation), or the reason there is none."""
    from fixbits.probe.profile import NotInProfile

    try:
        return prof.lookup(key, k=k, n=n)
    except NotInProfile as exc:
        return str(exc)


def _tail_variant(desc: Any) -> Any:
    from fixbits.desc import KCut

    if not desc.k_cuts or desc.k_cuts[0].count is None or desc.k_cuts[0].span_rule == "tail_dropped":
        return None
    c0 = desc.k_cuts[0]
    return desc.replace(k_cuts=(KCut("contiguous", count=c0.count, granule=c0.granule, span_rule="tail_dropped",
                                     merge=c0.merge, aligned_granule=c0.aligned_granule),) + desc.k_cuts[1:])


def sampled_operands(rec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """A's sampled rows and B's sampled columns of every draw of a collected case (or a dump's
    meta), concatenated, and each draw's (rows, cols): rebuilt on the CPU from the seeds."""
    from fixbits.probe import spikes
    from fixbits.probe.hashdraw import numpy_cols, numpy_rows

    m, n, k, dt = rec["m"], rec["n"], rec["k"], rec["dtype"]
    a_parts, b_parts, sizes = [], [], []
    for d in rec["draws"]:
        base = spikes.base_kind(d["kind"])
        # a plant touches whole columns of A and rows of B: the sampled ones are exact
        a_r, b_c = spikes.finish(d["kind"], numpy_rows((m, k), d["rows"], dt, base, d["seeds"][0]),
                                 numpy_cols((k, n), d["cols"], dt, base, d["seeds"][1]), d["seeds"][0], dt)  # fmt: skip
        a_parts.append(a_r)
        b_parts.append(b_c)
        sizes.append((len(d["rows"]), len(d["cols"])))
    return np.concatenate(a_parts, axis=0), np.concatenate(b_parts, axis=1), sizes


def draw_mismatches(desc: Any, a: np.ndarray, b: np.ndarray, sizes: list[tuple[int, int]], got: np.ndarray,
                    out_dtype: str) -> tuple[list[int], np.ndarray]:
    """(differing cells per draw, the emulated cells as float32) for ``desc`` against the
    sampled cuBLAS cells ``got`` (float32, draw after draw): one emulate call for all draws,
    only each draw's own diagonal block compared (integer views)."""
    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits, to_dtype

    em = emulate(desc, a, b)
    bad, r0, c0, off, ems = [], 0, 0, 0, []
    for r, c in sizes:
        blk = em[r0:r0 + r, c0:c0 + c]
        want = to_dtype(got[off:off + r * c].reshape(r, c), out_dtype)
        bad.append(int((bits(np.ascontiguousarray(blk)) != bits(np.ascontiguousarray(want))).sum()))
        ems.append(np.asarray(blk, dtype=np.float32).flatten())
        r0, c0, off = r0 + r, c0 + c, off + r * c
    return bad, np.concatenate(ems)


def check_one(rec: dict[str, Any], desc_dict: dict[str, Any] | None, dump_dir: str | None) -> dict[str, Any]:
    """Emulate one collected case (all its draws in one call) and classify it."""
    from fixbits.desc import GEMMDesc

    desc = GEMMDesc.from_dict(desc_dict)  # type: ignore[arg-type]
    m, n, k, dt = rec["m"], rec["n"], rec["k"], rec["dtype"]
    a, b, sizes = sampled_operands(rec)
    got_all = np.array(rec["got"], dtype=np.uint32).view(np.float32)

    def compare(dsc: Any) -> tuple[list[int], np.ndarray]:
        return draw_mismatches(dsc, a, b, sizes, got_all, rec["out_dtype"])

    bad, em = compare(desc)
    out = {"draws": len(sizes), "comparisons": int(sum(r * c for r, c in sizes)), "mismatches": int(sum(bad)),
           "outcome": "match", "note": ""}
    if sum(bad):
        first = next(i for i, x in enumerate(bad) if x)
        out["note"] = f"{sum(1 for x in bad if x)}/{len(bad)} draws differ, first in draw {first} ({rec['draws'][first]['kind']})"
        alt = _tail_variant(desc)
        if alt is not None and sum(compare(alt)[0]) == 0:
            out["outcome"] = "tail_defect"
            out["note"] += f"; splitk_tail predicts {rec.get('tail_loss', 0)} dropped"
        else:
            out["outcome"] = "wrong_entry"
        if dump_dir:
            p = Path(dump_dir) / f"{dt}_{rec['out_dtype']}_{m}x{n}x{k}.npz"
            # the operands are redrawn from the seeds in meta (fixbits.probe.hashdraw.numpy_rows /
            # numpy_cols); they are stored as well while small
            small = a.size + b.size <= 500_000  # the device call returns files below 16 MB: keep dumps small
            arrays = {"a_rows": a.astype(np.float32), "b_cols": b.astype(np.float32)} if small else {}
            np.savez_compressed(p, **arrays, got=got_all, emu=em,
                                sizes=np.array(sizes), bad=np.array(bad),
                                meta=np.array(json.dumps({**{x: rec[x] for x in ("dtype", "out_dtype", "set", "m", "n",
                                                                                  "k", "key")},
                                                          "desc": desc.to_dict(), "draws": rec["draws"],
                                                          "outcome": out["outcome"]})))
    return out


def _check_task(args: tuple[dict[str, Any], dict[str, Any] | None, str | None]) -> dict[str, Any]:
    rec, desc, dump = args
    try:
        return check_one(rec, desc, dump)
    except Exception as exc:  # noqa: BLE001  (reported per case)
        return {"outcome": "check_error", "note": f"{type(exc).__name__}: {exc}"[:300], "draws": 0,
                "comparisons": 0, "mismatches": 0}


FIELDS = ["dtype", "out_dtype", "set", "m", "n", "k", "answer", "outcome", "draws", "comparisons", "mismatches", "note"]


class Checker:
    """Classifies collected cases as they arrive (a process pool when ``workers`` > 1), so the
    CPU emulates while the GPU collects the next shapes."""

    def __init__(self, out_dir: Path, profiles: dict[tuple[str, str], Any], workers: int = 1) -> None:
        self.out_dir, self.profiles, self.workers = out_dir, profiles, workers
        self.dump = out_dir / "mismatch_dump"
        self.dump.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict[str, Any]] = []
        self.futs: dict[Any, int] = {}
        self.pool: Any = None
        if workers > 1:
            import concurrent.futures as cf
            import multiprocessing as mp

            self.pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
        self.serial: list[tuple[int, Any]] = []

    def submit(self, recs: list[dict[str, Any]]) -> None:
        for rec in recs:
            row = {f: rec.get(f, "") for f in FIELDS}
            row["answer"] = rec.get("key", "")
            if isinstance(row["draws"], list):  # the collected draw specs: the csv keeps their count
                row["draws"] = len(row["draws"])
            row["note"] = rec.get("note", rec.get("error", ""))
            i = len(self.rows)
            self.rows.append(row)
            if "outcome" in rec:
                continue
            prof = self.profiles.get((rec["dtype"], rec["out_dtype"]))
            d = _lookup(prof, rec["key"], rec["k"], rec["n"]) if prof is not None else "no profile"
            if isinstance(d, str):
                row["outcome"], row["note"] = "not_in_profile", d[:200]
                continue
            row["outcome"] = "unchecked"
            args = (rec, d.to_dict(), str(self.dump))
            if self.pool is not None:
                self.futs[self.pool.submit(_check_task, args)] = i
            else:
                self.serial.append((i, args))

    def _done(self, i: int, res: dict[str, Any]) -> None:
        self.rows[i].update({x: res[x] for x in ("outcome", "draws", "comparisons", "mismatches", "note")})

    def finish(self, deadline: float | None, log: Any = print) -> dict[str, dict[str, int]]:
        """Wait for the checks until ``deadline``; write DIR/sweep.csv ('unchecked' rows: run
        ``check`` again on a CPU to finish them); return counts per dtype pair."""
        self.serial.sort(key=lambda t: t[1][0]["k"])
        for i, args in self.serial:
            if deadline is not None and time.time() > deadline:
                break
            self._done(i, _check_task(args))
        if self.pool is not None:
            import concurrent.futures as cf

            try:
                left = None if deadline is None else max(1.0, deadline - time.time())
                for f in cf.as_completed(list(self.futs), timeout=left):
                    self._done(self.futs[f], f.result())
            except cf.TimeoutError:
                log("sweep check: out of time; the rest is 'unchecked'")
            self.pool.shutdown(wait=False, cancel_futures=True)
        with (self.out_dir / "sweep.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(self.rows)
        stats: dict[str, dict[str, int]] = {}
        for r in self.rows:
            st = stats.setdefault(f"{r['dtype']}->{r['out_dtype']}", {})
            st["shapes"] = st.get("shapes", 0) + 1
            st[r["outcome"]] = st.get(r["outcome"], 0) + 1
            st["comparisons"] = st.get("comparisons", 0) + int(r["comparisons"] or 0)
        return stats


def check(out_dir: Path, profiles: dict[tuple[str, str], Any], *, workers: int = 1, deadline: float | None = None,
          log: Any = print, only_unchecked: bool = False) -> dict[str, dict[str, int]]:
    """Classify every case collected under DIR (a CPU run after the device call); writes DIR/sweep.csv.

    ``only_unchecked``: keep the outcome of every row the device's own checks finished (DIR/sweep.csv)
    and emulate only the rows left 'unchecked' at its deadline."""
    recs = load_samples(out_dir)
    if only_unchecked and (out_dir / "sweep.csv").exists():
        with (out_dir / "sweep.csv").open(newline="") as fh:
            done = {(r["dtype"], r["out_dtype"], r["set"], int(r["m"]), int(r["n"]), int(r["k"])): r
                    for r in csv.DictReader(fh) if r["outcome"] != "unchecked"}
        kept = [done.get((r["dtype"], r["out_dtype"], r.get("set", ""), r["m"], r["n"], r["k"])) for r in recs]
        recs = [r if d is None else {**r, **{f: d[f] for f in ("outcome", "comparisons", "mismatches", "note")}}
                for r, d in zip(recs, kept, strict=True)]
        log(f"check: {sum(d is not None for d in kept)} rows kept from sweep.csv, {sum(d is None for d in kept)} to emulate")
    ck = Checker(out_dir, profiles, workers)
    ck.submit(recs)
    return ck.finish(deadline, log)
