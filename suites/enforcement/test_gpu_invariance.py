"""GPU gate: pinned mode gives one set of bytes over a kernel's whole config space (block sizes,
num_warps, num_stages), equal to the CPU tree model; free mode is shown to vary (test power)."""

from __future__ import annotations

import pytest

from fixbits.corpus.check import PairCheck, check_pair
from fixbits.corpus.registry import corpus_meta, load_corpus, pairs

pytestmark = [pytest.mark.gpu, pytest.mark.nvidia]

_FREE_SEEN: dict[str, int] = {}


def pair_kind_params() -> list:
    return [pytest.param(e, d, k, id=f"{e.name}-{d}-{k}") for e, d in pairs() for k in corpus_meta()["kinds"]]


def _explain(r: PairCheck) -> str:
    lines = [f"{r.kernel}/{r.dtype}/{r.kind} seed={r.seed} shape={dict(r.shape)}",
             f"pinned classes per output: {r.classes('pinned')}; free: {r.classes('free')}"]
    lines += [f"config error: {e}" for e in r.errors]
    for run in r.runs:
        lines.append(f"  {run.config}: pinned {dict((k, v[:12]) for k, v in run.pinned)}")
    for m in r.model:
        if not m.equal:
            lines.append(f"  model diff {m.output} @ {m.config}: {m.count} differ; first index {m.first_index}: "
                         f"got {m.got_bits} want {m.want_bits}")
    return "\n".join(lines)


@pytest.mark.parametrize(("entry", "dtype", "kind"), pair_kind_params())
def test_pinned_bytes_identical_across_config_space(entry, dtype, kind, seed, record_property) -> None:
    r = check_pair(entry, dtype, kind, seed, "cuda")
    record_property("pinned_classes", r.classes("pinned"))
    record_property("free_classes", r.classes("free"))
    _FREE_SEEN[f"{entry.name}/{dtype}/{kind}"] = max(r.classes("free").values(), default=0)
    assert not r.errors, _explain(r)
    assert r.pinned_invariant, _explain(r)
    reason = getattr(entry.load(), "NO_MODEL_REASON", "")
    record_property("model_outputs", sorted({m.output for m in r.model}) or reason)
    assert r.model or reason, f"{entry.name}: no output checked against the CPU model\n{_explain(r)}"
    assert r.model_equal, _explain(r)


def test_free_order_varies_somewhere(seed) -> None:
    """Without pinning, at least one corpus kernel returns >1 distinct outputs over its space."""
    if not _FREE_SEEN:
        for e in load_corpus():
            if e.name in ("row_sum", "col_sum", "layernorm_bwd"):
                r = check_pair(e, "fp32", "wide", seed, "cuda")
                _FREE_SEEN[f"{e.name}/fp32/wide"] = max(r.classes("free").values(), default=0)
    varied = {k: v for k, v in _FREE_SEEN.items() if v > 1}
    assert varied, f"free order gave one class everywhere (seed={seed}): {_FREE_SEEN}; the suite has no power"
