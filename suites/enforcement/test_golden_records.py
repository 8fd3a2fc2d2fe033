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


def _id(r: golden.EnforcementRecord) -> str:
    return f"{r.kernel}-{r.dtype}-{r.kind}-s{r.seed}-{r.output}"


def test_golden_files_parse_and_name_known_kernels() -> None:
    for p in golden.files():
        gf = golden.load(p)
        assert gf.records, f"{p}: no records"
        for r in gf.records:
            e = entry(r.kernel)
            assert r.dtype in e.dtypes, f"{p}: {r.kernel} has no dtype {r.dtype}"


@pytest.mark.skipif(not REPLAYABLE, reason="no CPU-replayable enforcement golden records committed yet")
@pytest.mark.parametrize("rec", REPLAYABLE, ids=_id)
def test_record_replays_through_cpu_tree_model(rec: golden.EnforcementRecord) -> None:
    ok, got = golden.replay_cpu(rec)
    assert ok, (f"{rec.source}: {rec.kernel}/{rec.dtype}/{rec.kind} seed={rec.seed} shape={rec.shape_dict()} "
                f"output {rec.output}: GPU sha256 {rec.sha256} != CPU tree model {got}")


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
