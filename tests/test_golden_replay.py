"""Golden records: replay every committed record through the emulator, and test the machinery."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from fixbits.desc import GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.golden import (
    GOLDEN_DIR,
    GoldenError,
    GoldenRecord,
    golden_files,
    load_file,
    pack_output,
    regenerate_inputs,
    replay,
    run,
    save_file,
    sha256_of,
)
from fixbits.numerics import formats

pytestmark = pytest.mark.unit


def _committed() -> list:  # type: ignore[type-arg]
    """One param per committed record; a file that does not load becomes one failing param
    (with the loader's file-and-key message) instead of a collection error."""
    params = []
    for path in golden_files():
        try:
            params.extend(
                pytest.param(path, rec, None, id=f"{path.stem}:{rec.id}") for rec in load_file(path)
            )
        except GoldenError as exc:
            params.append(pytest.param(path, None, str(exc), id=f"{path.stem}:unreadable"))
    return params


@pytest.mark.parametrize(("path", "record", "error"), _committed())
def test_committed_record_replays_bit_exact(
    path: Path, record: GoldenRecord | None, error: str | None
) -> None:
    assert record is not None, error
    res = replay(record)
    assert res.ok, (
        f"{path.name}: {res.message} (seeds a={record.seed_a} b={record.seed_b} acc={record.seed_acc})"
    )


def make_record(
    desc: GEMMDesc,
    shape: tuple[int, int, int],
    kind: str,
    seed: int,
    *,
    acc: bool = False,
    inline: bool = False,
) -> GoldenRecord:
    m, n, k = shape
    rec = GoldenRecord(
        id=f"test_{desc.short_hash}_{kind}_{seed}",
        suite="unit",
        case="block" if acc else "gemm",
        shape=shape,
        in_dtype=desc.in_dtype,
        out_dtype=desc.out_dtype,
        input_kind=kind,
        seed_a=seed,
        seed_b=seed + 1,
        seed_acc=seed + 2 if acc else None,
        descriptor=desc.to_dict(),
        desc_hash=desc.short_hash,
        sha256="0" * 64,
        elements=m * n,
        env={"host": "unit-test"},
    )
    a, b, c = regenerate_inputs(rec)
    out = emulate(desc, a, b, acc=c)
    return dataclasses.replace(rec, sha256=sha256_of(out), output_b64z=pack_output(out) if inline else None)


DESCS = [
    GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", k_loop_step=64),
    GEMMDesc(
        arch="sm_90",
        instruction="wgmma",
        instruction_k=32,
        in_dtype="fp8_e4m3",
        use_fast_accum=False,
        promotion_interval=2,
    ),
    GEMMDesc(
        arch="sm_90",
        instruction="wgmma",
        instruction_k=16,
        in_dtype="bf16",
        out_dtype="bf16",
        k_cuts=(KCut("contiguous", span=64),),
    ),
]


@pytest.mark.parametrize("kind", ["ordinary", "wide"])
def test_generated_records_roundtrip_and_replay(tmp_path: Path, kind: str) -> None:
    seed = 40
    recs = [make_record(d, (5, 7, 100), kind, seed + 10 * i) for i, d in enumerate(DESCS)]
    recs.append(make_record(DESCS[0].replace(k_loop_step=16), (8, 8, 16), kind, seed + 99, acc=True))
    save_file(tmp_path / "golden_unit.yaml", recs)
    loaded = load_file(tmp_path / "golden_unit.yaml")
    assert loaded == recs
    for rec in loaded:
        res = replay(rec)
        assert res.ok and res.elements == rec.elements, f"{res.message} seed {rec.seed_a}"


def test_mismatch_is_reported_with_first_element(tmp_path: Path) -> None:
    seed = 50
    rec = make_record(DESCS[0], (4, 6, 80), "wide", seed, inline=True)
    # pretend the GPU disagreed on element (1, 2) by one ulp
    a, b, _ = regenerate_inputs(rec)
    out = emulate(rec.desc(), a, b).copy()
    out_bits = formats.bits(out)
    out_bits[1, 2] ^= 1
    gpu = dataclasses.replace(rec, sha256=sha256_of(out), output_b64z=pack_output(out))
    res = replay(gpu)
    assert not res.ok and res.mismatched == 1 and res.first_index == (1, 2) and res.max_ulps == 1, res.message
    assert "first at (1, 2)" in res.message
    blind = dataclasses.replace(gpu, output_b64z=None)
    assert "not inlined" in replay(blind).message


def test_load_errors_name_file_and_key(tmp_path: Path) -> None:
    good = make_record(DESCS[0], (2, 2, 16), "ordinary", 60).to_dict()
    cases = {
        "missing": (
            {k: v for k, v in good.items() if k != "sha256"},
            "records\\[0\\]: missing key\\(s\\) sha256",
        ),
        "unknown": ({**good, "colour": 1}, "records\\[0\\]: unknown key\\(s\\) colour"),
        "shape": ({**good, "shape": [1, 2]}, "records\\[0\\].shape"),
        "dtype": ({**good, "in_dtype": "fp64"}, "records\\[0\\].in_dtype: unsupported dtype 'fp64'"),
        "desc": (
            {**good, "descriptor": {**good["descriptor"], "arch": "sm_75"}},
            "records\\[0\\].descriptor: arch='sm_75'",
        ),
        "case": ({**good, "case": "conv"}, "records\\[0\\].case"),
    }
    import yaml

    for name, (data, pattern) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"records": [data]}))
        with pytest.raises(GoldenError, match=f"{name}.yaml: {pattern}"):
            load_file(path)
    bad = tmp_path / "notalist.yaml"
    bad.write_text("records: 3\n")
    with pytest.raises(GoldenError, match="notalist.yaml: expected a mapping with a 'records' list"):
        load_file(bad)


def test_replay_cli_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = make_record(DESCS[0], (3, 3, 32), "ordinary", 70)
    save_file(tmp_path / "golden_a.yaml", [rec, dataclasses.replace(rec, id="tampered", sha256="f" * 64)])
    code = run(argparse.Namespace(dir=str(tmp_path), verbose=False))
    out = capsys.readouterr().out
    assert (
        code == 1
        and "records 2  matched 1  mismatched 1  errors 0" in out
        and "MISMATCH golden_a.yaml: tampered" in out
    )


def test_golden_dir_is_the_repository_one() -> None:
    assert GOLDEN_DIR.parts[-2:] == ("matrices", "golden")
