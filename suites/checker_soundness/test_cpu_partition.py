"""CPU half of the checker's soundness gate: compile configs ahead of time and partition them.

No bytes can be measured without a GPU, so the assertions here are the checker's own contracts
on real compiler output: every corpus kernel is modelled (no text fallback on PTX), the
signature is a function of the file (deterministic, identical text gives one class), and the
partition never has more classes than configs. The partition, the class count and the speed are
recorded as JUnit properties (never asserted: speed depends on the machine).
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from fixbits.checker.soundness import cases, load_families

pytestmark = pytest.mark.checker_soundness
triton = pytest.importorskip("triton")

FAMILIES = {f.name: f for f in load_families()}
# (target, family) pairs compiled in CI: every family on sm_90 (first dtype, free kernels, the
# first configs of its cpu_space), reductions on sm_100 and gfx942. benchmarks/checker/partition.py
# compiles the whole cpu_space. sm_100 GEMMs (tcgen05, rotated loops) are compared as text today.
PER_FAMILY = 3
PAIRS = [("sm_90", name) for name in FAMILIES] + [
    ("sm_100", "row_sum"),
    ("sm_100", "softmax"),
    ("gfx942", "row_sum"),
    ("gfx942", "softmax"),
]


@pytest.fixture(scope="module", autouse=True)
def _isolated_triton_cache(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Compile into a per-run cache (never the user's ~/.triton)."""
    old = triton.knobs.cache.dir
    triton.knobs.cache.dir = str(tmp_path_factory.mktemp("triton-cache"))
    yield
    triton.knobs.cache.dir = old


@pytest.mark.parametrize(("target", "family"), PAIRS, ids=[f"{t}-{f}" for t, f in PAIRS])
def test_partition(target: str, family: str, record_property) -> None:  # type: ignore[no-untyped-def]
    from fixbits.checker.api import signature
    from fixbits.checker.partition import compile_case

    fam = FAMILIES[family]
    todo = [c for c in cases(fam, cpu=True) if c.dtype == fam.dtypes[0] and not c.pinned][:PER_FAMILY]
    got = [compile_case(fam, c, target) for c in todo]
    files = sum(len(g.texts) for g in got)
    check_s = sum(g.check_s for g in got)
    classes: dict[str, list[str]] = defaultdict(list)
    by_text: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for g in got:
        classes[g.digest].append(g.case.label())
        by_text[g.texts].add(g.digest)
    record_property("configs", len(got))
    record_property("checker_classes", len(classes))
    record_property("distinct_texts", len(by_text))
    record_property("files_per_s", round(files / max(check_s, 1e-9), 1))
    record_property("partition", "; ".join(" | ".join(v) for v in classes.values()))

    assert got, f"{family}: no config compiled for {target}"
    # identical compiler output is one class; the checker never has more classes than texts
    assert all(len(d) == 1 for d in by_text.values()), f"{family}/{target}: same text, different signatures"
    assert len(classes) <= len(by_text)
    if target.startswith("sm_"):
        fb = {g.case.label(): g.fallbacks for g in got if g.fallbacks}
        assert not fb, f"{family}/{target}: the PTX walk fell back to text on {fb}"
    # deterministic: the same file gives the same signature again
    g0 = got[0]
    again = "|".join(signature(t).digest for t in g0.texts)
    first = "|".join(signature(t).digest for t in g0.texts)
    assert again == first


def test_checker_speed_is_recorded(record_property) -> None:  # type: ignore[no-untyped-def]
    """Files per second of the checker on the frozen PTX subset (recorded, never asserted)."""
    from pathlib import Path

    from fixbits.checker.api import signature

    root = Path(__file__).resolve().parents[2] / "matrices" / "checker" / "ptx"
    texts = [p.read_text() for p in sorted(root.glob("*.ptx"))]
    assert texts
    t0 = time.perf_counter()
    for _ in range(3):
        for t in texts:
            signature(t, "ptx")
    dt = time.perf_counter() - t0
    record_property("frozen_ptx_files_per_s", round(3 * len(texts) / dt, 1))
