#!/usr/bin/env python3
"""Phase B of reconstruct, on CPU, against the cuBLAS bytes a device sweep recorded.

    python benchmarks/reconstruction/predict_offline.py SWEEP_DIR OUT.jsonl [--deadline-s 1800] [--workers 2]
    python benchmarks/reconstruction/predict_offline.py --apply OUT.jsonl   # add accepted entries to the profiles

For every answer the sweep reached that is not in its pair's profile and that at least two recorded
shapes share: the known descriptors of the same algorithm (this pair, the other input dtype, the
other output dtype; dtypes replaced, carried to the answer's SPLITK_NUM, K-step and lane variants,
as fixbits.probe.reconstruct predicts on the device) are tried on the cheapest shape (selection,
all draws); while more than one survives, the next cheapest shape selects too. The survivor is
then checked on every other recorded shape of the answer (held out, all draws) and accepted only
when at least one shape is held out and every held-out shape matches. The evidence is the device's
own bytes (sampled output cells of 10 draws, ordinary and wide); the selection shapes are named in
each entry's note so a reader can tell selection from verification.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TWIN = {"fp16": "bf16", "bf16": "fp16"}


def _profiles() -> dict[tuple[str, str], Any]:
    from fixbits.probe.profile import available, load

    out = {}
    for p in available():
        pr = load(p)
        out[(pr.dtype, pr.out_dtype)] = pr
    return out


def candidates(profs: dict[tuple[str, str], Any], dt: str, od: str, key: str) -> list[Any]:
    from fixbits.desc import GEMMDesc
    from fixbits.probe import reconstruct as R

    algo, split = key.split("-"), R._split_of(key)
    known: list[tuple[int, str, dict[str, Any]]] = []
    for (pdt, pod), pr in profs.items():
        if pdt not in (dt, TWIN.get(dt)) or pod not in (od, "fp32", pdt):
            continue
        own = (pdt, pod) == (dt, od)
        for k2, e in pr.entries.items():
            p2 = k2.split("-")
            if p2[0] != algo[0]:
                continue
            rank = (0 if k2 == key else 4) + (0 if p2[1] == algo[1] else 2) + (0 if p2[5] == algo[5] else 1)
            d2 = e.desc.replace(in_dtype=dt, out_dtype=od).to_dict()
            known.append((rank + (0 if own else 8), k2, d2))
    known.sort(key=lambda t: t[0])
    bases, seen = [], set()
    for _, k2, d2 in known:
        ad = R._adapt(d2, R._split_of(k2), split)
        if ad is None:
            continue
        sig = json.dumps(ad, sort_keys=True)
        if sig not in seen:
            seen.add(sig)
            bases.append(GEMMDesc.from_dict(ad))
        if len(bases) >= 8:
            break
    cands: list[Any] = []
    for b in bases:
        cands += R._step_variants(b)
    lane = next((b for b in bases if R._lane_variants(b)), None)
    if lane is not None:
        cands += R._lane_variants(lane)
    return list(dict.fromkeys(cands))


_PROFS: dict[tuple[str, str], Any] = {}


def _init() -> None:
    _PROFS.update(_profiles())


def one(item: tuple[tuple[str, str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    from fixbits.probe.sweep import check_one

    profs = _PROFS
    (dt, od, key), recs = item
    recs = sorted(recs, key=lambda r: (r["k"] * min(8, r["m"]) * min(8, r["n"]), r["m"], r["n"]))
    res: dict[str, Any] = {
        "pair": f"{dt}->{od}",
        "dtype": dt,
        "out_dtype": od,
        "key": key,
        "shapes": len(recs),
    }
    alive = candidates(profs, dt, od, key)
    res["candidates"] = len(alive)
    if not alive:
        return {**res, "outcome": "no_known_descriptor"}
    used = 0
    while len(alive) > 1 and used < len(recs) - 1:
        alive = fitting(alive, recs[used])
        used += 1
    if len(alive) == 1 and used == 0:
        alive = fitting(alive, recs[0])
        used = 1
    if len(alive) > 1:  # readings that are one function of every shape are one reading
        alive, res["one_function"] = one_per_function(alive, key)
    if len(alive) > 1:  # the STAGES_ID rule among the readings every selection shape leaves
        from fixbits.probe.stages import prefer_step

        alive = prefer_step(alive, key)
        res["stage_rule"] = len(alive) == 1
    if len(alive) > 1:  # readings that are one function on every K from the least to the most recorded
        ks = [r["k"] for r in recs]
        if one_function_on(alive, min(ks), max(ks)):
            alive = alive[:1]
            res["k_range"] = [min(ks), max(ks)]
    if len(alive) != 1:
        # the readings left, for a device run on shapes where they part (step_candidates.py)
        readings = [d.to_dict() for d in alive]
        shapes = [[r["m"], r["n"], r["k"]] for r in recs]
        return {**res, "outcome": "none_fits" if not alive else "ambiguous", "selection": used, "readings": readings,
                "recorded": shapes}  # fmt: skip
    desc = alive[0]
    held = recs[used:]
    per = [check_one(r, desc.to_dict(), None) for r in held]
    bad = [f"{r['m']}x{r['n']}x{r['k']}" for r, p in zip(held, per, strict=True) if p["mismatches"]]
    return {
        **res,
        "outcome": "accepted" if held and not bad else "held_out_miss" if bad else "no_held_out",
        "desc": desc.to_dict(),
        "selection": [[r["m"], r["n"], r["k"]] for r in recs[:used]],
        "held_out": [[r["m"], r["n"], r["k"]] for r in held],
        "held_out_miss": bad,
        "comparisons": sum(p["comparisons"] for p in per),
    }


def fitting(cands: list[Any], rec: dict[str, Any]) -> list[Any]:
    """The candidates whose bits equal the recorded cuBLAS cells of ``rec`` on every draw; one
    emulation per class of candidates that owe each other the same bits at its K
    (fixbits.probe.recover.draw_classes)."""
    from fixbits.probe.recover import draw_classes
    from fixbits.probe.sweep import check_one

    keep: list[int] = []
    for members in draw_classes(cands, rec["k"]):
        if check_one(rec, cands[members[0]].to_dict(), None)["mismatches"] == 0:
            keep += members
    return [cands[j] for j in sorted(keep)]


RANGE_WORK = 40_000_000  # K summed over the range times readings: the most one_function_on checks


def one_function_on(readings: list[Any], k_lo: int, k_hi: int) -> bool:
    """Whether the readings give the same bits at every K in [k_lo, k_hi] (one class of
    fixbits.probe.recover.draw_classes at each: equal canonical trees, or equal address maps past
    K 4096, which may split equal readings but never merge two that differ). Readings that part
    only outside the recorded K range are then one function where the answer was seen: an
    entry restricted to that range (a K variant) is exact on it, and a K outside it stays out
    of the profile. False without checking when the range is too long to check."""
    from fixbits.probe.recover import draw_classes

    if (k_hi - k_lo + 1) * (k_lo + k_hi) // 2 * len(readings) > RANGE_WORK:
        return False
    return all(len(draw_classes(readings, k)) == 1 for k in range(k_lo, k_hi + 1))


def one_per_function(readings: list[Any], key: str) -> tuple[list[Any], bool]:
    """(one reading per function, whether any merged): readings with equal
    fixbits.probe.plan.function_key give the same bits on every shape. The one kept carries the
    answer's implied step (fixbits.probe.stages) where its step places nothing, so the entry
    agrees with the STAGES_ID rule."""
    from fixbits.probe.plan import function_key
    from fixbits.probe.stages import implied_step

    groups: dict[Any, list[Any]] = {}
    for d in readings:
        groups.setdefault(function_key(d), []).append(d)
    step = implied_step(key)
    kept = []
    for fk, members in groups.items():
        rep = members[0]
        if step is not None and fk.residue == "last" and step % rep.instruction_k == 0:
            rep = rep.replace(k_loop_step=step)
        kept.append(rep)
    return kept, len(kept) < len(readings)


def _cost(recs: list[dict[str, Any]]) -> int:
    """The emulation work of an answer's cheapest recorded shape (K deep, 8x8 cells at most)."""
    return min(r["k"] * min(8, r["m"]) * min(8, r["n"]) for r in recs)


def predict(
    sweep_dir: Path,
    out: Path,
    deadline_s: float,
    workers: int,
    skip: list[Path] | tuple[Path, ...] = (),
    *,
    retry_ambiguous: bool = False,
    cheap_first: bool = False,
) -> None:
    from fixbits.probe.sweep import load_samples

    t0 = time.time()
    profs = _profiles()
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in load_samples(sweep_dir):
        pr = profs.get((r["dtype"], r["out_dtype"]))
        if "got" in r and pr is not None and r["key"] not in pr.entries:
            by[(r["dtype"], r["out_dtype"], r["key"])].append(r)
    done = {
        (r["pair"], r["key"])
        for f in skip
        for r in map(json.loads, f.read_text().splitlines())
        if not (retry_ambiguous and r.get("outcome") == "ambiguous")
    }
    items = sorted(
        ((k, v) for k, v in by.items() if len(v) >= 2 and (f"{k[0]}->{k[1]}", k[2]) not in done),
        key=(lambda it: (_cost(it[1]), -len(it[1]))) if cheap_first else (lambda it: -len(it[1])),
    )
    if done:
        print(f"{len(done)} answers tried by an earlier run left out (--skip)", flush=True)
    print(f"{len(by)} answers not in profile, {len(items)} with >= 2 recorded shapes", flush=True)
    with out.open("w") as fh, ProcessPoolExecutor(workers, initializer=_init) as ex:
        futs = {ex.submit(one, it): it[0] for it in items}
        for f in as_completed(futs):
            try:
                res = f.result()
            except Exception as exc:  # noqa: BLE001
                res = {"key": futs[f][2], "pair": f"{futs[f][0]}->{futs[f][1]}", "outcome": f"error: {exc}"}
            fh.write(json.dumps(res) + "\n")
            fh.flush()
            print(res["pair"], res["key"], res.get("shapes"), res["outcome"], flush=True)
            if time.time() - t0 > deadline_s:
                print("deadline: the rest is left out", flush=True)
                for g in futs:
                    g.cancel()
                break


def apply(path: Path, run: str) -> None:
    from fixbits.desc import GEMMDesc
    from fixbits.probe.profile import PROFILE_DIR, KVariant, ProfileEntry

    profs = _profiles()
    n = kept = conflicts = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("outcome") != "accepted":
            continue
        pr = profs[(r["dtype"], r["out_dtype"])]
        have = pr.entries.get(r["key"])
        if have is not None:  # a device-verified entry came in meanwhile: it stays
            same = have.desc == GEMMDesc.from_dict(r["desc"])
            print(
                f"{r['pair']} {r['key']}: already in the profile ({'same descriptor' if same else 'DIFFERENT descriptor'})"
            )
            kept += 1
            conflicts += not same
            continue
        sel = ", ".join("x".join(map(str, s)) for s in r["selection"])
        rule = "; the STAGES_ID step rule chose among the readings the selection left" if r.get("stage_rule") else ""
        if r.get("one_function"):
            rule += "; readings that differ only in a step that places nothing (residue last) counted as one"
        note = (
            f"predicted from known descriptors (offline, CPU); selected on {sel}{rule}; verified on "
            f"{len(r['held_out'])} held-out shapes against the H200's recorded cuBLAS cells (run {run})"
        )
        first = r["selection"][0]
        desc = GEMMDesc.from_dict(r["desc"])
        variants: tuple[KVariant, ...] = ()
        if r.get("k_range"):  # the readings part outside it: the entry holds on that range only
            lo, hi = r["k_range"]
            variants = (KVariant(lo, hi, desc, tuple(first)),)
            note += (f"; the readings the recorded shapes left are one function on K {lo}..{hi} (equal canonical "
                     "trees at every K), so the entry holds there only")
        pr.entries[r["key"]] = ProfileEntry(
            r["key"], desc, tuple(first), len(r["held_out"]), r["shapes"], (), note, variants
        )
        pr.failed.pop(r["key"], None)  # the recorded bytes settle what the device probe could not
        n += 1
    for pr in profs.values():
        pr.save(PROFILE_DIR)
    print(
        f"{n} entries added; {kept} answers already in the profile kept ({conflicts} with another descriptor)"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--deadline-s", type=float, default=1800)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--apply", default=None, metavar="JSONL")
    ap.add_argument("--run", default="s5", help="with --apply: the device run whose recorded cells were used")
    ap.add_argument(
        "--skip",
        nargs="*",
        type=Path,
        default=[],
        metavar="JSONL",
        help="earlier runs' results: the answers they tried are not tried again",
    )
    ap.add_argument(
        "--retry-ambiguous",
        action="store_true",
        help="with --skip: try again the answers an earlier run left ambiguous (the STAGES_ID rule may settle them)",
    )
    ap.add_argument("--cheap-first", action="store_true", help="answers with the cheapest shapes first")
    a = ap.parse_args()
    if a.apply:
        apply(Path(a.apply), a.run)
    else:
        predict(Path(a.sweep_dir), Path(a.out), a.deadline_s, a.workers, a.skip,
                retry_ambiguous=a.retry_ambiguous, cheap_first=a.cheap_first)  # fmt: skip
