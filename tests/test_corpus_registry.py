"""The corpus registry (YAML), the kernel modules' interface, input draws and golden files."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from fixbits.corpus import golden
from fixbits.corpus.common import draw
from fixbits.corpus.registry import BUDGETS_YAML, CORPUS_YAML, budget, load_corpus, pairs


def test_corpus_has_at_least_twenty_kernel_dtype_pairs() -> None:
    ps = pairs()
    assert len(ps) >= 20, len(ps)
    names = {e.name for e, _ in ps}
    for must in ("row_sum", "col_sum", "softmax", "log_softmax", "layernorm_fwd", "layernorm_bwd", "rmsnorm",
                 "gemm_colsum"):
        assert must in names
    assert any(n.startswith("inductor_") for n in names)
    dts = {d for _, d in ps}
    assert {"fp32", "fp16", "bf16"} <= dts and any(d.startswith("fp8") for d in dts)


@pytest.mark.parametrize("e", load_corpus(), ids=lambda e: e.name)
def test_every_module_has_the_corpus_interface(e) -> None:
    mod = importlib.import_module(e.module)
    for attr in ("KERNELS", "CPU_REPLAY", "make_inputs", "launch", "reference", "aot"):
        assert hasattr(mod, attr), f"{e.module} lacks {attr}"
    cfgs = e.configs()
    assert len(cfgs) == int(np.prod([len(v) for _, v in e.space])) and len({c.label() for c in cfgs}) == len(cfgs)
    assert len({c.num_warps for c in cfgs}) > 1 or len({c.blocks for c in cfgs}) > 1, f"{e.name}: one config"
    inputs = mod.make_inputs(e.shape_dict(cpu=True), e.dtypes[0], "wide", 3)
    again = mod.make_inputs(e.shape_dict(cpu=True), e.dtypes[0], "wide", 3)
    for k, v in inputs.items():
        assert v.tobytes() == again[k].tobytes(), f"{e.name}: input {k} not reproducible from its seed"
    if mod.CPU_REPLAY:
        ref = mod.reference(inputs, {})
        assert set(mod.CPU_REPLAY) <= set(ref), f"{e.name}: CPU_REPLAY {mod.CPU_REPLAY} not all modelled"


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8_e4m3"])
def test_draws_are_nonzero_and_wide_spreads_exponents(dtype: str) -> None:
    o = draw((64, 64), dtype, "ordinary", 1).astype(np.float32)
    w = draw((64, 64), dtype, "wide", 1).astype(np.float32)
    assert np.count_nonzero(o) > 3000 and np.count_nonzero(w) > 2000, dtype
    ew = np.frexp(w[w != 0])[1]
    eo = np.frexp(o[o != 0])[1]
    assert ew.max() - ew.min() > eo.max() - eo.min(), f"{dtype}: wide draw no wider than ordinary"
    assert np.all(np.isfinite(w)), dtype


def test_bad_dtype_and_bad_kind_are_named() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'fp4'.*supported"):
        draw((4,), "fp4", "ordinary", 0)
    with pytest.raises(ValueError, match="unknown input kind 'odd'"):
        draw((4,), "fp32", "odd", 0)


def _write(tmp_path: Path, data) -> Path:
    p = tmp_path / "corpus.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_bad_corpus_yaml_names_file_and_key(tmp_path: Path) -> None:
    base = yaml.safe_load(CORPUS_YAML.read_text())
    bad = dict(base, kernels={"k": dict(base["kernels"]["row_sum"], dtypes=["fp64"])})
    with pytest.raises(ValueError, match=r"corpus.yaml: kernels.k.dtypes: unknown \['fp64'\]"):
        load_corpus(_write(tmp_path, bad))
    bad = dict(base, kernels={"k": dict(base["kernels"]["row_sum"], space={"BLOCK_M": [3]})})
    with pytest.raises(ValueError, match="kernels.k.space.BLOCK_M: block sizes must be powers of two"):
        load_corpus(_write(tmp_path, bad))
    bad = dict(base, kernels={"k": {"module": "x"}})
    with pytest.raises(ValueError, match="kernels.k.dtypes: missing"):
        load_corpus(_write(tmp_path, bad))


def test_budgets_default_and_overrides(tmp_path: Path) -> None:
    assert budget("row_sum", "fp32") == yaml.safe_load(BUDGETS_YAML.read_text())["default"]
    p = tmp_path / "b.yaml"
    p.write_text(yaml.safe_dump({"default": 0.95, "kernels": {"col_sum": 0.9, "col_sum/bf16": 0.88}}))
    assert budget("col_sum", "fp32", p) == 0.9 and budget("col_sum", "bf16", p) == 0.88
    assert budget("softmax", "fp16", p) == 0.95
    p.write_text(yaml.safe_dump({"kernels": {}}))
    with pytest.raises(ValueError, match="b.yaml: default: missing"):
        budget("x", "fp32", p)


def test_golden_file_errors_name_the_key(tmp_path: Path) -> None:
    p = tmp_path / "enforcement_x.yaml"
    p.write_text(yaml.safe_dump({"schema": golden.SCHEMA, "records": [{"kernel": "row_sum"}]}))
    with pytest.raises(ValueError, match=r"enforcement_x.yaml: records\[0\]: bad record"):
        golden.load(p)
    p.write_text(yaml.safe_dump({"schema": "other", "records": []}))
    with pytest.raises(ValueError, match="schema"):
        golden.load(p)


def test_golden_round_trip_and_cpu_replay_detects_a_tampered_hash(tmp_path: Path) -> None:
    from fixbits.corpus import row_sum

    shape = {"M": 8, "N": 100}
    x = row_sum.make_inputs(shape, "fp32", "wide", 4)
    sha = golden.sha256(row_sum.reference(x, {})["y"])
    rec = golden.EnforcementRecord("row_sum", "fp32", "wide", 4, tuple(shape.items()), "y", sha, True, True, "")
    p = tmp_path / "enforcement_unit.yaml"
    golden.save(p, {"note": "unit"}, [rec, golden.EnforcementRecord(*[*vars(rec).values()][:6], "0" * 64,
                                                                      True, True, "")])
    loaded = golden.load(p).records
    assert golden.replay_cpu(loaded[0])[0] is True
    ok, got = golden.replay_cpu(loaded[1])
    assert ok is False and got == sha


def test_explore_space_extends_the_official_one(tmp_path: Path) -> None:
    base = yaml.safe_load(CORPUS_YAML.read_text())
    k = dict(base["kernels"]["col_sum"], space={"BLOCK_N": [8, 16], "num_warps": [2, 4]},
             explore={"BLOCK_N": [64], "num_warps": [1]})
    e = load_corpus(_write(tmp_path, dict(base, kernels={"k": k})))[0]
    off, wide = e.configs(), e.configs(explore=True)
    assert wide[: len(off)] == off and len(off) == 4 and len(wide) == 9
    bad = dict(base, kernels={"k": dict(k, explore={"ROWS": [2]})})
    with pytest.raises(ValueError, match="kernels.k.explore.ROWS: not an axis of space"):
        load_corpus(_write(tmp_path, bad))


@pytest.mark.parametrize("e", [e for e in load_corpus() if e.variants], ids=lambda e: e.name)
def test_yaml_variants_exist_in_their_modules(e) -> None:
    mod = importlib.import_module(e.module)
    for name, _ in e.variants:
        assert name in getattr(mod, "VARIANTS", ()), f"{e.name}: variant {name} not in {e.module}.VARIANTS"
        assert e.variant_configs(name), f"{e.name}: variant {name} has no configs"


@pytest.mark.parametrize(("rows", "cols", "itemsize", "warps"), [(256, 32, 4, 4), (256, 16, 2, 8), (32, 64, 4, 8),
                                                                   (128, 8, 1, 2)])
def test_rows_split_covers_the_tile(rows: int, cols: int, itemsize: int, warps: int) -> None:
    from fixbits.corpus.common import rows_split

    hi, lo = rows_split(rows, cols, itemsize, warps)
    assert hi * lo == rows and hi >= 1 and lo >= 1 and hi & (hi - 1) == 0
