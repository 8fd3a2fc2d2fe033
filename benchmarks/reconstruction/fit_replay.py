#!/usr/bin/env python3
"""Which descriptor reading gives cuBLAS's bytes on a shape matmul_replay kept (CPU).

    python benchmarks/reconstruction/fit_replay.py REPLAY_DIR [--steps-only]

matmul_replay saves, per row, cuBLAS's outputs of every draw; the operands are redrawn here
(matmul_replay.read_replay). The profile's descriptor for the row's answer is varied as
explain_mismatch.py varies a wrong entry (K-loop step and residue turn, accumulation, instruction
width, then the split-K cut's granule, aligned granule, span rule and merge; ``--steps-only``:
the step and residue turn alone), and every variant that gives cuBLAS's bytes on all draws is
printed. Evidence for placing a profile entry's miss, not a verdict by itself: an entry is
changed only after the variant also fits the answer's other recorded shapes.

    python benchmarks/reconstruction/fit_replay.py REPLAY_DIR --readings RESULTS.jsonl \
        --sweep SWEEP_DIR --accepted OUT.jsonl

For answers predict_offline.py left ambiguous (replayed with matmul_replay.py --cublas-only on the
shapes step_candidates.py --ambiguous chose): each reading is tried on every draw of every
replayed row whose heuristic answer is that answer. When exactly one fits them all, it is checked
on the recorded shape predict_offline held back (SWEEP_DIR's cells) and written to OUT.jsonl as
an accepted result (selection: the other recorded shapes and the replayed ones; held out: that
shape), which ``predict_offline.py --apply`` adds to the profiles.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runners" / "device"))
sys.path.insert(0, str(ROOT / "benchmarks" / "reconstruction"))


def variants(desc: Any, steps_only: bool = False) -> list[tuple[str, Any]]:
    """The profile's descriptor first, then the readings explain_mismatch tries, labelled by the
    fields where they depart from it."""
    from explain_mismatch import label, order_variants, split_variants

    from fixbits.probe.reconstruct import _step_variants

    others = _step_variants(desc) if steps_only else order_variants(desc)
    if not steps_only and desc.k_cuts and desc.k_cuts[0].count:
        others = others + split_variants(desc)
    out = [("profile", desc)]
    out += [(label(d, desc), d) for d in dict.fromkeys(others) if d != desc]
    return out


def main() -> int:
    import numpy as np
    from matmul_replay import read_replay

    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits
    from fixbits.probe import profile as profiles

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("replay_dir", type=Path)
    ap.add_argument("--steps-only", action="store_true", help="vary the K-loop step and residue turn only")
    ap.add_argument("--readings", type=Path, default=None, help="predict_offline.py results (ambiguous answers)")
    ap.add_argument("--sweep", type=Path, default=None, help="with --readings: the sweep whose cells they came from")
    ap.add_argument("--accepted", type=Path, default=None, help="with --readings: write settled answers here")
    args = ap.parse_args()
    if args.readings is not None:
        return settle(args.replay_dir, args.readings, args.sweep, args.accepted)
    for row, draws in read_replay(args.replay_dir):
        dt, od = row["pair"].split("->")
        m, n, k = row["shape"]
        prof = profiles.load(
            Path(profiles.PROFILE_DIR) / profiles.profile_filename("sm_90", "130100", dt, od)
        )
        try:
            desc = prof.lookup(row["answer"], k=k, n=n)
        except profiles.NotInProfile as exc:
            print(f"== {row['pair']} {m}x{n}x{k}: {exc}", flush=True)
            continue
        print(
            f"== {row['pair']} {m}x{n}x{k} {row['answer']}: {desc.k_cuts}, step {desc.k_loop_step}",
            flush=True,
        )
        for name, cand in variants(desc, args.steps_only):
            diffs = 0
            for a, b, want in draws:
                diffs += int((bits(emulate(cand, a, b)) != bits(np.ascontiguousarray(want))).sum())
                if diffs and name != "profile":
                    break  # a variant is out at its first differing draw
            if diffs == 0 or name == "profile":
                print(f"  {'FITS' if diffs == 0 else 'differs'} {name} (ndiff {diffs})", flush=True)
    return 0


def settle(replay_dir: Path, readings_path: Path, sweep: Path | None, accepted: Path | None) -> int:
    """Ambiguous answers settled by their replayed rows (see the module docstring)."""
    import json
    from collections import defaultdict

    import numpy as np
    from matmul_replay import read_replay

    from fixbits.desc import GEMMDesc
    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits

    amb = {
        (r["pair"], r["key"]): r
        for r in map(json.loads, readings_path.read_text().splitlines())
        if r.get("outcome") == "ambiguous" and r.get("readings")
    }
    fits: dict[tuple[str, str], list[bool]] = {}
    replayed: dict[tuple[str, str], list[list[int]]] = defaultdict(list)
    for row, draws in read_replay(replay_dir):
        key = (row["pair"], row["answer"])
        if key not in amb:
            print(f"== {row['pair']} {row['shape']}: heuristic gave {row['answer']} (asked {row.get('row_answer')}), "
                  "not an ambiguous answer", flush=True)  # fmt: skip
            continue
        readings = [GEMMDesc.from_dict(d) for d in amb[key]["readings"]]
        ok = fits.setdefault(key, [True] * len(readings))
        for i, d in enumerate(readings):
            ok[i] = ok[i] and all(
                np.array_equal(bits(emulate(d.at_k(row["shape"][2]), a, b)), bits(np.ascontiguousarray(want)))
                for a, b, want in draws
            )
        replayed[key].append(list(row["shape"]))
        print(f"== {row['pair']} {row['shape']} {row['answer']}: readings fitting so far {ok}", flush=True)
    cells = _recorded_cells(sweep) if sweep is not None else {}
    lines = []
    for key, ok in fits.items():
        r = amb[key]
        if sum(ok) != 1:
            print(f"{key}: {sum(ok)} readings fit every replayed draw: not settled", flush=True)
            continue
        desc = GEMMDesc.from_dict(r["readings"][ok.index(True)])
        recorded = [list(s) for s in r["recorded"]]
        held = recorded[r["selection"] :]  # the shapes predict_offline's selection did not use
        verdict = "no_held_out" if not held or sweep is None else _held_out_verdict(cells, r, desc, held)
        print(f"{key}: one reading fits; held-out {held}: {verdict}", flush=True)
        if verdict == "accepted":
            lines.append({**{x: r[x] for x in ("pair", "dtype", "out_dtype", "key", "shapes")},
                          "outcome": "accepted", "desc": desc.to_dict(), "selection": recorded[: r["selection"]] + replayed[key],
                          "held_out": held, "held_out_miss": [], "settled_by": "replay"})  # fmt: skip
    if accepted is not None:
        accepted.write_text("".join(json.dumps(x) + "\n" for x in lines))
        print(f"{len(lines)} answers settled, written to {accepted}")
    return 0


def _recorded_cells(sweep: Path) -> dict[tuple[str, str, str, int, int, int], dict[str, Any]]:
    """A sweep's recorded cases by (dtype, out dtype, answer, m, n, k), read once."""
    from fixbits.probe.sweep import load_samples

    return {(r["dtype"], r["out_dtype"], r["key"], r["m"], r["n"], r["k"]): r for r in load_samples(sweep) if "got" in r}


def _held_out_verdict(cells: dict[Any, dict[str, Any]], r: dict[str, Any], desc: Any, held: list[list[int]]) -> str:
    """'accepted' when the desc gives the recorded cuBLAS cells of every held-out shape on every draw."""
    from fixbits.probe.sweep import check_one

    for shape in held:
        rec = cells.get((r["dtype"], r["out_dtype"], r["key"], *shape))
        if rec is None:
            return "held_out_not_found"
        if check_one(rec, desc.to_dict(), None)["mismatches"]:
            return "held_out_miss"
    return "accepted"


if __name__ == "__main__":
    raise SystemExit(main())
