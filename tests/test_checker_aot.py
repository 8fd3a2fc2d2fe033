"""The AOT store of the soundness gate: the CPU pre-step writes kernels that load back by key,
and the install hook serves the JIT's compile request from the store instead of compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runners" / "device" / "checker_soundness.py"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("aot"))


def _runner():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("checker_soundness_runner", RUNNER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _build(tmp: Path) -> Path:
    store = tmp / "store"
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp / "cache"))
    cmd = [
        sys.executable,
        str(RUNNER),
        "--out",
        str(tmp / "o"),
        "--build-aot",
        str(store),
        "--ptx-dir",
        str(tmp / "ptx"),
        "--only",
        "row_sum",
        "--max-cases",
        "2",
        "--workers",
        "1",
        "--budget-s",
        "300",
    ]
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    return store


def test_store_round_trip_and_hit(store: Path) -> None:
    from fixbits.checker import aot_store
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.checker.soundness import cases, load_families
    from fixbits.corpus.common import Config, to_device

    rows = [json.loads(x) for x in (store / "cases.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("error" not in r and len(r["keys"]) == 1 for r in rows)
    kern = [json.loads(x) for x in (store / "kernels.jsonl").read_text().splitlines()]
    assert {k["key"] for k in kern} == {r["keys"][0] for r in rows}
    assert all(k["digest"] for k in kern)
    k = aot_store.load(store, rows[0]["keys"][0], src=None)
    assert k is not None and "cubin" in k.asm and "ptx" not in k.asm
    assert aot_store.load(store, "0" * 32, src=None) is None

    # the same request again, through the hook: served from the store (the loaded kernel has no
    # PTX, so the CPU capture that wants PTX fails after the hit, which is what proves the hit)
    import triton
    import triton.compiler as tc

    fam = next(f for f in load_families() if f.name == "row_sum")
    case = next(c for c in cases(fam) if c.label() == rows[0]["label"] and c.dtype == rows[0]["dtype"])
    import importlib

    mod = importlib.import_module(fam.module)
    shape = dict(fam.shape)
    inputs = {n: to_device(v, "cpu") for n, v in mod.make_inputs(shape, case.dtype, "ordinary", 0).items()}
    stats: dict[str, int] = {}
    orig = tc.compile
    try:
        aot_store.install(store, stats)
        with pytest.raises(KeyError), capture_launches(gpu_target("sm_90")):
            mod.launch(inputs, shape, Config(case.blocks, case.num_warps, case.num_stages), case.pinned)
    finally:
        tc.compile = orig
        triton.compile = orig
    assert stats == {"hit": 1, "miss": 0}


def test_loaded_kernels_take_the_pre_step_signature(store: Path) -> None:
    from fixbits.checker import aot_store

    run = _runner()
    kern = {}
    for line in (store / "kernels.jsonl").read_text().splitlines():
        k = json.loads(line)
        kern[k["key"]] = k
    key = next(iter(kern))
    loaded = aot_store.load(store, key, src=None)
    parts, shas, _, _ = run.kernel_parts([loaded], [None], 7, kern, {})
    assert parts == [kern[key]["digest"]] and shas == [kern[key]["ptx_sha"]]
    # a stored kernel the manifest does not know is never certified equal to anything
    p1, _, _, _ = run.kernel_parts([loaded], [None], 1, {}, {})
    p2, _, _, _ = run.kernel_parts([loaded], [None], 2, {}, {})
    assert p1 != p2 and p1[0].startswith("unknown:")


def test_loaded_kernels_are_signed_for_their_launch_from_kept_ptx(store: Path) -> None:
    """Launch mode needs the PTX, which a loaded kernel lacks: the runner reads the copy the
    pre-step kept (by the manifest's PTX sha) and signs it for the launch; without it, the
    kernel gets a part of its own rather than the unspecialised digest."""
    from fixbits.checker import aot_store
    from fixbits.checker.api import signature
    from fixbits.checker.launch import corpus_launch
    from fixbits.checker.soundness import cases, load_families

    run = _runner()
    kern = {}
    for line in (store / "kernels.jsonl").read_text().splitlines():
        row = json.loads(line)
        kern[row["key"]] = row
    k = next(iter(kern.values()))
    fam = next(f for f in load_families() if f.name == "row_sum")
    spec = corpus_launch(fam.module, dict(fam.shape), cases(fam)[0].label())
    assert spec is not None
    loaded = aot_store.load(store, k["key"], src=None)
    ptx_dir = store.parent / "ptx"
    parts, shas, _, _ = run.kernel_parts([loaded], [None], 3, kern, {}, spec, str(ptx_dir))
    want = signature((ptx_dir / f"{k['ptx_sha']}.ptx").read_text(), "ptx", launch=spec)
    assert parts == [want.digest] and shas[0] == k["ptx_sha"]
    alone, _, _, _ = run.kernel_parts([loaded], [None], 3, kern, {}, spec, "")
    assert alone[0].startswith("unknown:")


def test_runner_dry_run_plans_every_config() -> None:
    from fixbits.checker.soundness import cases, load_families

    want = sum(len(cases(f)) for f in load_families())
    out = subprocess.run(
        [sys.executable, str(RUNNER), "--out", "/tmp/unused", "--dry-run"],
        check=True, capture_output=True, text=True, cwd=ROOT,
    ).stdout  # fmt: skip
    assert f"total {want} configs" in out


def test_a_store_signed_by_another_checker_is_refused(store: Path, tmp_path: Path) -> None:
    """The device run takes its signatures from the store: made by another checker version they
    are not this checker's verdict, so the runner stops and names the re-sign command."""
    import shutil

    from fixbits.checker.aot_build import checker_version, stale_signatures

    assert stale_signatures(store) == (0, len((store / "kernels.jsonl").read_text().splitlines()))
    old = tmp_path / "old_store"
    shutil.copytree(store, old)
    rows = [json.loads(x) for x in (old / "kernels.jsonl").read_text().splitlines()]
    rows[0]["checker"] = "0" * 16
    (old / "kernels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert stale_signatures(old) == (1, len(rows)) and checker_version() != "0" * 16
    got = subprocess.run(
        [sys.executable, str(RUNNER), "--out", str(tmp_path / "o"), "--aot", str(old), "--only", "row_sum"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert got.returncode == 2, got.stderr[-2000:]
    assert "1 of" in got.stderr and "--resign" in got.stderr


def test_checker_version_covers_what_signs_and_only_that() -> None:
    """The version is a digest of the modules ``api.signature`` imports (transitively): the walk
    and tree modules are in it; the store, build, prune and gate modules are not, so editing them
    leaves a signed store current."""
    from fixbits.checker.aot_build import signing_sources

    names = {p.relative_to(ROOT / "fixbits" / "checker").as_posix() for p in signing_sources()}
    assert {"api.py", "walk.py", "node.py", "forms.py", "signature.py", "balanced.py", "ptx/walk.py",
            "ptx/parse.py", "gcn/walk.py", "gcn/parse.py"} <= names
    assert not names & {"aot_build.py", "aot_store.py", "prune.py", "soundness.py", "partition.py", "cli.py",
                        "compile.py"}


def test_preflight_reads_a_packed_store(store: Path, tmp_path: Path) -> None:
    """--preflight answers from the archive the device call will carry, without unpacking it:
    rc 0 when this checker signed every kernel, 2 with the count when not."""
    import tarfile

    good = tmp_path / "good.tar.xz"
    with tarfile.open(good, "w:xz") as tf:
        tf.add(store / "kernels.jsonl", arcname="store/kernels.jsonl")
    rows = [json.loads(x) for x in (store / "kernels.jsonl").read_text().splitlines()]
    rows[-1]["checker"] = "f" * 16
    stale = tmp_path / "kernels.jsonl"
    stale.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = tmp_path / "bad.tar.xz"
    with tarfile.open(bad, "w:xz") as tf:
        tf.add(stale, arcname="store/kernels.jsonl")
    for archive, rc, words in ((good, 0, "0 signed by another"), (bad, 2, "1 signed by another")):
        got = subprocess.run(
            [sys.executable, str(RUNNER), "--out", str(tmp_path / "o"), "--aot", str(archive), "--preflight"],
            capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        assert got.returncode == rc, got.stdout + got.stderr[-2000:]
        assert words in got.stdout
