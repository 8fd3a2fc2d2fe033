"""The environment fingerprint: works anywhere, hashes stably, and names what changed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixbits import env
from fixbits.env import EnvFingerprint

REPO = Path(__file__).resolve().parent.parent

H200 = EnvFingerprint(
    gpu_name="NVIDIA H200",
    sm="sm_90",
    sm_count=132,
    driver="580.95.05 (CUDA 13.0)",
    cuda_runtime="13.0",
    cublas="13.1.0",
    cublaslt="13.1.0",
    torch="2.11.0+cu130",
    triton="3.6.0",
    numpy="2.5.2",
    python="3.12.3",
    host="runner-1",
)


def test_fingerprint_here_is_complete_enough() -> None:
    fp = env.collect()
    assert fp.python.count(".") == 2 and fp.host
    assert fp.numpy is not None
    if fp.sm is None:  # a CPU machine: the GPU facts are absent, not invented
        assert fp.gpu_name is None and fp.sm_count is None


def test_fingerprint_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    fp = env.collect()
    assert fp.torch is None and fp.gpu_name is None and fp.sm is None and fp.cuda_runtime is None


def test_hash_is_stable_and_ignores_the_host() -> None:
    assert H200.short_hash == dataclasses.replace(H200, host="runner-2").short_hash
    assert len(H200.short_hash) == 12 and int(H200.short_hash, 16) >= 0
    assert H200.short_hash != dataclasses.replace(H200, cublaslt="13.1.1").short_hash
    assert H200.short_hash == EnvFingerprint.from_dict(json.loads(H200.to_json())).short_hash


def test_diff_names_the_changed_fields() -> None:
    upgraded = dataclasses.replace(H200, cublas="13.2.0", cublaslt="13.2.0", driver="590.10 (CUDA 13.1)")
    assert H200.diff(upgraded) == ["driver", "cublas", "cublaslt"]
    assert H200.diff(H200) == []
    assert "cublaslt: 13.1.0 -> 13.2.0" in H200.describe_diff(upgraded)


def test_round_trip_and_unknown_keys() -> None:
    assert EnvFingerprint.from_dict(yaml.safe_load(H200.to_yaml())) == H200
    with pytest.raises(ValueError, match="unknown key\\(s\\) gpu; known: "):
        EnvFingerprint.from_dict({"gpu": "H100"})


def test_libraries_for_drift_reports() -> None:
    assert dict(H200.libraries()) == {
        "cublaslt": "13.1.0",
        "cuda": "13.0",
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "driver": "580.95.05 (CUDA 13.0)",
    }
    assert EnvFingerprint().libraries() == ()


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_env_cli(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    env.add_arguments(parser)
    assert env.run(parser.parse_args(["--format", fmt])) == 0
    out = capsys.readouterr().out
    data = yaml.safe_load(out) if fmt == "yaml" else json.loads(out)
    assert set(data) == {"hash", *(f.name for f in dataclasses.fields(EnvFingerprint))}
    assert data["hash"] == EnvFingerprint.from_dict({k: v for k, v in data.items() if k != "hash"}).short_hash
    assert env.run(parser.parse_args(["--hash"])) == 0
    assert capsys.readouterr().out.strip() == data["hash"]


def test_env_is_a_fixbits_subcommand() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fixbits.cli", "env", "--hash"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip()) == 12
