"""Tables and the plot of the pinned-vs-free speed benchmark (CPU-side; matplotlib optional)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIELDS = ("kernel", "dtype", "free_us", "pinned_us", "ratio", "spread", "rounds", "budget", "verdict",
          "free_best", "pinned_best", "auto_ratio", "rotate", "finished", "seconds", "before", "errors")


def verdict(ratio: float, budget: float) -> str:
    if ratio != ratio:  # NaN
        return "no-data"
    if ratio >= budget:
        return "ok"
    return "slow" if ratio >= 0.85 else "too-slow"


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(FIELDS), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def markdown(rows: Sequence[dict[str, Any]], header: str = "") -> str:
    lines = [header, "", "| kernel | dtype | free (us) | pinned (us) | pinned/free speed | spread | rounds | budget | "
             "| rewrite only | earlier run | pinned best config | free best config |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in rows:
        au = f"{r['auto_ratio']:.3f}" if r.get("auto_ratio", float("nan")) == r.get("auto_ratio") else ""
        before = r.get("before", "")
        before = f"{before:.3f}" if isinstance(before, float) else str(before)
        lines.append(f"| {r['kernel']} | {r['dtype']} | {r['free_us']:.2f} | {r['pinned_us']:.2f} | "
                     f"{r['ratio']:.3f} | {r['spread']:.3f} | {r.get('rounds', '')} | {r['budget']:.2f} | "
                     f"{r['verdict']} | {au} | {before} | {r.get('pinned_best', '')} | {r.get('free_best', '')} |")
    n = len(rows)
    ok = [r for r in rows if r["ratio"] == r["ratio"]]
    if ok:
        within = sum(1 for r in ok if r["ratio"] >= 0.95)
        floor = sum(1 for r in ok if r["ratio"] < 0.85)
        worst = min(ok, key=lambda r: r["ratio"])
        lines += ["", f"{within}/{n} pairs within 5% of free order ({100 * within / n:.0f}%; target >= 90%), "
                  f"{floor} below 0.85x; slowest {worst['kernel']}/{worst['dtype']} at {worst['ratio']:.3f}x."]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], path: Path) -> bool:
    """Bar chart of pinned/free speed per pair; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = [f"{r['kernel']}\n{r['dtype']}" for r in rows]
    vals = [r["ratio"] for r in rows]
    errs = [r["spread"] / 2 for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows)), 4.5))
    colors = ["tab:green" if v >= 0.95 else ("tab:orange" if v >= 0.85 else "tab:red") for v in vals]
    ax.bar(range(len(rows)), vals, yerr=errs, color=colors, capsize=2)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(0.95, color="tab:orange", lw=0.8, ls="--", label="0.95 budget")
    ax.axhline(0.85, color="tab:red", lw=0.8, ls=":", label="0.85 floor")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_ylabel("pinned / free speed (autotuned, same space)")
    ax.set_title("fixbits inner-tree reductions vs free order")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True
