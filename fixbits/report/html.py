"""The gate's drift report as Markdown (a PR comment, an issue), JSON and one self-contained HTML page.

The HTML page is what a person opens first after a red gate: the verdict, what changed in the
environment, which slice ran and why, the match rate per family and the speed ratios as plots,
then every drift with its shape, dtype, descriptor hash and first differing element. It must
open from a CI artifact with no network, so it carries its CSS and its plots (inline SVG drawn
by matplotlib; without matplotlib the same numbers are shown as tables only).
"""

from __future__ import annotations

import html as _html
import io
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fixbits.gate import FamilyStat, GateOutcome, SpeedRatio

MAX_ROWS = 200  # drift rows shown; the JUnit XML holds all of them
_COLOURS = {0: "#1a7f37", 1: "#cf222e", 2: "#9a6700"}


def _e(v: object) -> str:
    return _html.escape(str(v), quote=True)


def _md(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")[:240]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100.0 * x:.1f}%"


def speed_sources(speeds: Sequence[SpeedRatio]) -> str:
    """Where the ratios come from: this run's JUnit properties and/or benchmark CSVs (older runs)."""
    srcs = sorted({s.source for s in speeds})
    return "sources: " + ", ".join(srcs) + " (a CSV holds a benchmark run's figures, not this run's)"


def speed_groups(speeds: Sequence[SpeedRatio]) -> list[tuple[str, float, int]]:
    """(label, geometric mean, count) per label, slowest first."""
    by: dict[str, list[float]] = defaultdict(list)
    for s in speeds:
        by[s.label].append(s.ratio)
    rows = [(k, math.exp(sum(math.log(v) for v in vs) / len(vs)), len(vs)) for k, vs in by.items()]
    return sorted(rows, key=lambda r: (r[1], r[0]))


def _drift_rows(o: GateOutcome) -> list[tuple[str, ...]]:
    s = o.summary
    if s is None:
        return []
    rows: list[tuple[str, ...]] = []
    for c in s.problems[:MAX_ROWS]:
        first = c.prop("first_diff") or (c.message.splitlines()[0] if c.message else "")
        n = c.prop("n_diff")
        rows.append(
            (
                c.test,
                c.outcome,
                c.prop("shape"),
                c.prop("dtype"),
                c.prop("desc_hash"),
                f"{n} differ, max {c.prop('ulp_max')} ulp" if n else "",
                first,
                c.prop("libraries"),
            )
        )
    return rows


_DRIFT_HEAD = ("test", "outcome", "shape", "dtype", "desc hash", "elements", "first difference", "libraries")


def _env_rows(o: GateOutcome) -> list[tuple[str, str, str]]:
    from fixbits.gate import FIELD_KIND

    rows = []
    for name in FIELD_KIND:
        recorded = sorted({v for b in o.baselines if (v := b.get(name)) is not None})
        now = o.current.get(name)
        rows.append((name, "—" if now is None else str(now), " / ".join(recorded) or "—"))
    return rows


# -- JSON ----------------------------------------------------------------------------------------


def as_json(o: GateOutcome) -> dict[str, Any]:
    s = o.summary
    return {
        "verdict": o.verdict,
        "exit_code": o.exit_code,
        "reason": o.reason,
        "started": o.started,
        "changes": [
            {
                "kind": c.kind,
                "field": c.field,
                "recorded": list(c.recorded),
                "current": c.current,
                "sources": list(c.sources),
            }
            for c in o.comparison.changes
        ],
        "notes": list(o.comparison.notes),
        "baselines_compared": o.comparison.compared,
        "slice": None
        if o.selection is None
        else {
            "kinds": list(o.selection.kinds),
            "paths": list(o.selection.paths),
            "mode": o.selection.mode,
            "reason": o.selection.reason,
        },
        "pytest": None
        if o.run is None
        else {
            "command": list(o.run.command),
            "returncode": o.run.returncode,
            "wall_s": round(o.run.wall_s, 1),
        },
        "counts": None
        if s is None
        else {
            "tests": s.tests,
            "passed": s.passed,
            "failed": s.failed,
            "errors": s.errors,
            "skipped": s.skipped,
        },
        "families": [
            {
                "family": f.family,
                "passed": f.passed,
                "failed": f.failed,
                "errors": f.errors,
                "skipped": f.skipped,
                "match_rate": f.match_rate,
            }
            for f in o.families
        ],
        "drift": [dict(zip(_DRIFT_HEAD, r, strict=True)) for r in _drift_rows(o)],
        "speed_ratios": [{"label": k, "geomean": g, "n": n} for k, g, n in speed_groups(o.speeds)],
        "environment": dict(o.current),
        "warnings": list(o.warnings),
    }


# -- Markdown ------------------------------------------------------------------------------------


def markdown(o: GateOutcome) -> str:
    lines = [f"## fixbits gate: {o.verdict.upper()} (exit {o.exit_code})", "", o.reason, ""]
    host = o.current.get("host") or "?"
    gpu = o.current.get("gpu_name") or "no GPU"
    lines += [f"Run {o.started} on `{host}` ({gpu}).", ""]
    lines += ["### What changed", ""]
    if o.comparison.changes:
        lines += ["| kind | field | recorded | now | recorded in |", "|---|---|---|---|---|"]
        for c in o.comparison.changes:
            lines.append(
                f"| {c.kind} | {c.field} | {_md(' / '.join(c.recorded))} | {_md(c.current)} | "
                f"{_md(', '.join(c.sources[:3]))} |"
            )
    else:
        lines.append(f"Nothing, against {o.comparison.compared} recorded fingerprint(s).")
    lines += [f"- {n}" for n in o.comparison.notes]
    if o.selection is not None:
        lines += [
            "",
            "### Slice",
            "",
            f"`{' '.join(o.selection.paths) or '(empty)'}`, mode `{o.selection.mode}` ({o.selection.reason})",
        ]
    s = o.summary
    if s is not None:
        lines += [
            "",
            "### Results",
            "",
            "| tests | passed | drift (failed) | errors | skipped |",
            "|---:|---:|---:|---:|---:|",
            f"| {s.tests} | {s.passed} | {s.failed} | {s.errors} | {s.skipped} |",
        ]
    if o.families:
        lines += [
            "",
            "| family | ran | matched | drift | errors | skipped | match rate |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for f in o.families:
            lines.append(
                f"| {_md(f.family)} | {f.ran} | {f.passed} | {f.failed} | {f.errors} | {f.skipped} | "
                f"{_pct(f.match_rate)} |"
            )
    rows = _drift_rows(o)
    if rows:
        title = "Drift" if o.summary is not None and o.summary.failed else "Errors (no drift verdict)"
        lines += [
            "",
            f"### {title}",
            "",
            "| " + " | ".join(_DRIFT_HEAD) + " |",
            "|" + "---|" * len(_DRIFT_HEAD),
        ]
        lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    if s is not None and s.skip_reasons:
        lines += [
            "",
            "<details><summary>Skipped, by reason</summary>",
            "",
            "| count | reason |",
            "|---:|---|",
        ]
        lines += [f"| {n} | {_md(reason)} |" for reason, n in s.skip_reasons[:20]]
        lines += ["", "</details>"]
    groups = speed_groups(o.speeds)
    if groups:
        lines += [
            "",
            "### Speed ratios (geometric mean; > 1 is faster than the reference)",
            "",
            "| what | ratio | n |",
            "|---|---:|---:|",
        ]
        lines += [f"| {_md(k)} | {g:.3f} | {n} |" for k, g, n in groups[:40]]
        lines += ["", _md(speed_sources(o.speeds))]
    if o.warnings:
        lines += ["", "### Warnings", ""] + [f"- {_md(w)}" for w in o.warnings]
    return "\n".join(lines) + "\n"


# -- plots ---------------------------------------------------------------------------------------


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline in HTML


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except Exception:
        return None
    plt.rcParams["svg.fonttype"] = "path"  # glyphs as paths: no font needed where the page opens
    plt.rcParams["svg.hashsalt"] = "fixbits"  # stable element ids: reports diff cleanly
    return plt


def match_rate_svg(families: Sequence[FamilyStat]) -> str | None:
    """Horizontal bars: the share of executed tests per family that returned the recorded bytes."""
    rows = [f for f in families if f.ran]
    plt = _pyplot()
    if not rows or plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.0))
    names = [f.family for f in rows]
    rates = [100.0 * (f.match_rate or 0.0) for f in rows]
    colours = ["#1a7f37" if f.failed == 0 else "#cf222e" for f in rows]
    ax.barh(names, rates, color=colours, height=0.6)
    for i, f in enumerate(rows):
        ax.text(min(rates[i], 100) + 1, i, f"{f.passed}/{f.ran}", va="center", fontsize=9)
    ax.set_xlim(0, 115)
    ax.set_xlabel("tests matching the recorded bytes (%)")
    ax.invert_yaxis()
    ax.set_title("match rate per family")
    svg = _svg(fig)
    plt.close(fig)
    return svg


def speed_svg(speeds: Sequence[SpeedRatio], *, limit: int = 40) -> str | None:
    """Horizontal bars of the geometric-mean speed ratio per label, with the 1.0 line."""
    groups = speed_groups(speeds)[:limit]
    plt = _pyplot()
    if not groups or plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(groups) + 1.0))
    names = [g[0] for g in groups]
    vals = [g[1] for g in groups]
    ax.barh(names, vals, color=["#0969da" if v >= 1.0 else "#bc4c00" for v in vals], height=0.6)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("speed ratio (> 1: faster than the reference)")
    ax.invert_yaxis()
    ax.set_title("speed ratios (geometric mean per kernel / group)")
    svg = _svg(fig)
    plt.close(fig)
    return svg


# -- HTML ----------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1100px;margin:0 auto;padding:0 20px 40px}
.banner{padding:18px 20px;color:#fff;font-size:22px;font-weight:600}
.banner small{display:block;font-size:14px;font-weight:400;opacity:.95}
h2{margin-top:28px;border-bottom:1px solid #d0d7de;padding-bottom:4px;font-size:18px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.n{text-align:right;font-variant-numeric:tabular-nums}
code,td.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.changed{background:#fff8c5} .bad{color:#cf222e;font-weight:600} .note{color:#57606a}
.plots{display:flex;flex-wrap:wrap;gap:16px} .plots figure{margin:0} svg{max-width:100%;height:auto}
"""


def _table(
    head: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    mono: Sequence[int] = (),
    numeric: Sequence[int] = (),
    row_class: Sequence[str] | None = None,
) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f' class="{row_class[i]}"' if row_class and row_class[i] else ""
        cells = []
        for j, c in enumerate(r):
            kind = "n" if j in numeric else ("mono" if j in mono else "")
            cells.append(f'<td class="{kind}">{_e(c)}</td>' if kind else f"<td>{_e(c)}</td>")
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"


def page(o: GateOutcome) -> str:
    """One HTML document with no external reference (CSS and SVG inline)."""
    colour = _COLOURS.get(o.exit_code, "#57606a")
    if o.exit_code == 0 and (o.summary is None or o.summary.passed == 0):
        colour = "#57606a"  # green would claim a comparison that did not happen
    gpu = o.current.get("gpu_name") or "no GPU visible"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>fixbits gate: {_e(o.verdict)}</title><style>{_CSS}</style></head><body>",
        f"<div class='banner' style='background:{colour}'>fixbits gate: {_e(o.verdict.upper())} "
        f"(exit {o.exit_code})<small>{_e(o.reason)}</small>"
        f"<small>{_e(o.started)} · {_e(o.current.get('host') or '?')} · {_e(gpu)}</small></div><main>",
    ]
    # what changed
    parts.append("<h2>What changed</h2>")
    if o.comparison.changes:
        parts.append(
            _table(
                ("kind", "field", "recorded", "now", "recorded in"),
                [
                    (c.kind, c.field, " / ".join(c.recorded), c.current, ", ".join(c.sources))
                    for c in o.comparison.changes
                ],
                mono=(2, 3),
            )
        )
    else:
        parts.append(f"<p>Nothing, against {o.comparison.compared} recorded fingerprint(s).</p>")
    parts += [f"<p class='note'>{_e(n)}</p>" for n in o.comparison.notes]
    if o.selection is not None:
        parts.append(
            f"<p>Slice: <code>{_e(' '.join(o.selection.paths) or '(empty)')}</code>, mode "
            f"<code>{_e(o.selection.mode)}</code> — {_e(o.selection.reason)}.</p>"
        )
    if o.run is not None:
        parts.append(
            f"<p class='note'>pytest exit {_e(o.run.returncode)} after {o.run.wall_s:.0f} s: "
            f"<code>{_e(' '.join(o.run.command[1:]))}</code></p>"
        )
    # results and plots
    s = o.summary
    if s is not None:
        parts.append("<h2>Results</h2>")
        parts.append(
            _table(
                ("tests", "passed", "drift (failed)", "errors", "skipped"),
                [(s.tests, s.passed, s.failed, s.errors, s.skipped)],
                numeric=(0, 1, 2, 3, 4),
            )
        )
    rows = _drift_rows(o)
    if rows:
        total = len(s.problems) if s is not None else len(rows)
        more = f" (first {len(rows)} of {total}; all in junit.xml)" if total > len(rows) else ""
        title = "Drift" if s is not None and s.failed else "Errors (no drift verdict)"
        parts.append(f"<h2 class='bad'>{title}{_e(more)}</h2>")
        parts.append(_table(_DRIFT_HEAD, rows, mono=(0, 2, 4, 6, 7)))
    plots = [p for p in (match_rate_svg(o.families), speed_svg(o.speeds)) if p]
    if plots:
        parts.append("<div class='plots'>" + "".join(f"<figure>{p}</figure>" for p in plots) + "</div>")
    elif (any(f.ran for f in o.families) or o.speeds) and _pyplot() is None:
        parts.append(
            "<p class='note'>(plots need matplotlib: pip install 'fixbits[plots]'; numbers below)</p>"
        )
    if o.families:
        parts.append(
            _table(
                ("family", "ran", "matched", "drift", "errors", "skipped", "match rate"),
                [
                    (f.family, f.ran, f.passed, f.failed, f.errors, f.skipped, _pct(f.match_rate))
                    for f in o.families
                ],
                numeric=(1, 2, 3, 4, 5, 6),
                row_class=["changed" if f.failed or f.errors else "" for f in o.families],
            )
        )
    groups = speed_groups(o.speeds)
    if groups:
        parts.append("<h2>Speed ratios</h2>")
        parts.append(
            _table(("what", "geomean ratio", "n"), [(k, f"{g:.3f}", n) for k, g, n in groups], numeric=(1, 2))
        )
        parts.append(f"<p>{_e(speed_sources(o.speeds))}</p>")
    if s is not None and s.skip_reasons:
        parts.append("<h2>Skipped, by reason</h2>")
        parts.append(_table(("count", "reason"), [(n, r) for r, n in s.skip_reasons], numeric=(0,)))
    parts.append("<h2>Environment</h2>")
    env_rows = _env_rows(o)
    changed = {c.field for c in o.comparison.changes}
    parts.append(
        _table(
            ("field", "now", "recorded"),
            env_rows,
            mono=(1, 2),
            row_class=["changed" if r[0] in changed else "" for r in env_rows],
        )
    )
    if o.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in o.warnings) + "</ul>")
    parts.append("</main></body></html>\n")
    return "".join(parts)
