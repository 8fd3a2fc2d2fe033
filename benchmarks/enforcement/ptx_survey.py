"""What each corpus config costs in sm_90 PTX, free vs pinned rewrite vs layout variants (CPU only).

    python -m benchmarks.enforcement.ptx_survey --out benchmarks/enforcement/sm90 [--only K ...] [--workers 2]

Why: the GPU time is scarce; shuffles, shared-memory ops and barriers per kernel show on a CPU
where the pinned tree pays more than free order, and which variant layouts remove it. Compiles
go through fixbits.corpus.aot.compile_launch (the JIT's own specialisation). Writes
ptx_survey.csv (every config) and ptx_survey.md (per kernel and mode: the cheapest config).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import multiprocessing as mp
from collections import Counter
from pathlib import Path

FIELDS = ("kernel", "dtype", "mode", "config", "shfl", "st_shared", "ld_shared", "bar", "f32_add", "ld_global",
          "error")


def survey_pair(name: str, dtype: str) -> list[dict]:
    """One row per (mode, config) of one pair: PTX counts summed over the kernels of a launch."""
    from fixbits.corpus.aot import PtxCounts, compile_launch
    from fixbits.corpus.registry import entry
    from fixbits.corpus.timing import jobs_for

    e = entry(name)
    rows = []
    for job in jobs_for(e):
        mode = "free" if job.how is False else ("rewrite" if job.how is True else str(job.how))
        row: dict = {"kernel": name, "dtype": dtype, "mode": mode, "config": job.cfg.label(), "error": ""}
        try:
            tot: Counter = Counter()
            for ck in compile_launch(e, dtype, job.cfg, job.how):
                tot.update(vars(PtxCounts.of(ck.ptx, ck.ttgir)))
            row.update({k: tot[k] for k in FIELDS[4:-1]})
        except Exception as ex:  # recorded, the rest go on
            row["error"] = f"{type(ex).__name__}: {str(ex).splitlines()[:1]}"
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> str:
    """Per (kernel, dtype, mode): the config with the fewest shuffles + shared-memory stores."""
    best: dict[tuple[str, str, str], dict] = {}
    for r in rows:
        if r["error"]:
            continue
        k = (r["kernel"], r["dtype"], r["mode"])
        cost = r["shfl"] + r["st_shared"] + r["bar"]
        if k not in best or cost < best[k]["shfl"] + best[k]["st_shared"] + best[k]["bar"]:
            best[k] = r
    lines = ["# sm_90 PTX per corpus kernel: cheapest config of each mode (Triton 3.6, compiled on CPU)", "",
             "shfl / st.shared / bar.sync counted in the PTX of every kernel a launch runs; `rewrite` = the "
             "automatic pinned rewrite, other modes = layout variants (same tree, same bytes).", "",
             "| kernel | dtype | mode | config | shfl | st.shared | bar | ld.global |", "|---|---|---|---|---:|---:|---:|---:|"]
    for (kern, dt, mode), r in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "free",
                                                                   kv[0][2] != "rewrite")):
        lines.append(f"| {kern} | {dt} | {mode} | {r['config']} | {r['shfl']} | {r['st_shared']} | {r['bar']} | "
                     f"{r['ld_global']} |")
    errs = [r for r in rows if r["error"]]
    if errs:
        lines += ["", f"{len(errs)} configs did not compile: " + "; ".join(
            f"{r['kernel']}/{r['mode']} {r['config']}: {r['error']}" for r in errs[:5])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--all-dtypes", action="store_true", help="default: the first dtype of each kernel")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    from fixbits.corpus.registry import load_corpus

    todo = [(e.name, d) for e in load_corpus() if not args.only or e.name in args.only
            for d in (e.dtypes if args.all_dtypes else e.dtypes[:1])]
    rows: list[dict] = []
    with cf.ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=mp.get_context("spawn")) as pool:
        for res in pool.map(survey_pair, *zip(*todo, strict=True)):
            rows += res
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "ptx_survey.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(FIELDS))
        w.writeheader()
        w.writerows(rows)
    md = summary(rows)
    (args.out / "ptx_survey.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
