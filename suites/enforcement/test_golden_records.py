"""Triton-release drift gate: pinned outputs recorded on GPU (matrices/golden/enforcement_*.yaml)
must not move. CPU half: every record the CPU tree model can reproduce from the inputs alone is
replayed through the model. GPU half: every record is re-run with the installed Triton."""

from __future__ import annotations

import pytest

from fixbits.corpus import golden
from fixbits.corpus.check import digest, run_config
from fixbits.corpus.common import to_device
from fixbits.corpus.registry import entry

RECORDS = golden.all_records()
REPLAYABLE = [r for r in RECORDS if r.cpu_replay]
GROUPS: dict[tuple, list[golden.EnforcementRecord]] = {}
for _r in REPLAYABLE:
    GROUPS.setdefault(golden.group_key(_r), []).append(_r)


def _id(r: golden.EnforcementRecord) -> str:
    return f"{r.kernel}-{r.dtype}-{r.kind}-s{r.seed}-{r.output}"


def test_golden_files_parse_and_name_known_kernels() -> None:
    for p in golden.files():
        gf = golden.load(p)
        assert gf.records, f"{p}: no records"
        for r in gf.records:
            e = entry(r.kernel)
            assert r.dtype in e.dtypes, f"{p}: {r.kernel} has no dtype {r.dtype}"


def _group_params() -> list:
    # Wide-exponent draws replay on every CI run; the ordinary draws (less power, same cost) in the
    # nightly fuzz mode, to keep the CPU job short: a full-shape replay costs about a second each.
    return [pytest.param(k, id=f"{k[0]}-{k[1]}-{k[2]}-s{k[3]}", marks=() if k[2] == "wide" else pytest.mark.fuzz)
            for k in sorted(GROUPS)]


@pytest.mark.skipif(not REPLAYABLE, reason="no CPU-replayable enforcement golden records committed yet")
@pytest.mark.parametrize("key", _group_params())
def test_records_replay_through_cpu_tree_model(key) -> None:
    recs = GROUPS[key]
    results = golden.replay_group(recs)
    bad = [(r, got) for r, (ok, got) in zip(recs, results, strict=True) if not ok]
    assert not bad, "\n".join(
        f"{r.source}: {r.kernel}/{r.dtype}/{r.kind} seed={r.seed} shape={r.shape_dict()} output {r.output}: "
        f"GPU sha256 {r.sha256} != CPU tree model {got}" for r, got in bad)


@pytest.mark.gpu
@pytest.mark.nvidia
@pytest.mark.skipif(not RECORDS, reason="no enforcement golden records committed yet")
@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_record_reproduces_on_installed_triton(rec: golden.EnforcementRecord, record_property) -> None:
    import triton

    e = entry(rec.kernel)
    mod = e.load()
    inputs = {k: to_device(v, "cuda") for k, v in mod.make_inputs(rec.shape_dict(), rec.dtype, rec.kind,
                                                                   rec.seed).items()}
    cfg = e.configs()[0]
    out = run_config(mod, inputs, rec.shape_dict(), cfg, pinned=True)
    got = digest(out[rec.output])
    record_property("triton", triton.__version__)
    assert got == rec.sha256, (f"{rec.source}: {rec.kernel}/{rec.dtype}/{rec.kind} seed={rec.seed} "
                               f"output {rec.output} moved under triton {triton.__version__} ({cfg.label()}): "
                               f"recorded {rec.sha256}, now {got}")
